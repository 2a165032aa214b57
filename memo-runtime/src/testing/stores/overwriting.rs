//! `IgnoresConditionalCreates`: an object store that, like some
//! S3-compatible servers, ignores `PutMode::Create` and overwrites.

use std::fmt;

use async_trait::async_trait;
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload, PutResult, Result};

use crate::forward::forward_object_store;

/// Wraps a store so that every conditional create (`PutMode::Create`)
/// becomes a plain overwrite, as a backend that ignores `If-None-Match`
/// does. Use it to check that such a backend is refused before it can
/// overwrite a committed entry.
///
/// # Example
///
/// ```
/// use memo_runtime::object_store::{memory::InMemory, path::Path, ObjectStore, PutMode};
/// use memo_runtime::testing::IgnoresConditionalCreates;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = IgnoresConditionalCreates::new(InMemory::new());
/// let path = Path::from("k");
/// store.put_opts(&path, "a".into(), PutMode::Create.into()).await.unwrap();
/// // The second create is not refused: it overwrites.
/// store.put_opts(&path, "b".into(), PutMode::Create.into()).await.unwrap();
/// # }
/// ```
pub struct IgnoresConditionalCreates<T> {
    inner: T,
}

impl<T> IgnoresConditionalCreates<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Self {
        IgnoresConditionalCreates { inner }
    }
}

/// Names the inner store by its `Display`: its `Debug` may print
/// credentials (an Azure access key, a SAS token).
impl<T: fmt::Display> fmt::Debug for IgnoresConditionalCreates<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IgnoresConditionalCreates")
            .field("inner", &format_args!("{}", self.inner))
            .finish()
    }
}

impl<T: fmt::Display> fmt::Display for IgnoresConditionalCreates<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IgnoresConditionalCreates({})", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for IgnoresConditionalCreates<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> Result<PutResult> {
        if opts.mode == PutMode::Create {
            opts.mode = PutMode::Overwrite;
        }
        self.inner.put_opts(location, payload, opts).await
    }

    forward_object_store!(self.inner => put_multipart_opts, get_opts, get_ranges, delete_stream,
        list, list_with_offset, list_with_delimiter, copy_opts, rename_opts);
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;

    use super::*;
    use crate::testing::stores::exercise_every_method;
    use crate::testing::{CountingStore, RequestCounts};

    #[tokio::test]
    async fn every_method_reaches_the_inner_store_and_a_create_arrives_as_an_overwrite() {
        let store = IgnoresConditionalCreates::new(CountingStore::new(InMemory::new()));
        let expected = exercise_every_method(&store).await;
        let overwritten = RequestCounts {
            puts: expected.puts + expected.creates,
            creates: 0,
            ..expected
        };
        assert_eq!(store.inner.counts(), overwritten);
    }
}
