//! One way to write an [`ObjectStore`] wrapper: the wrapper writes the
//! methods it changes and names the ones it passes through to the store it
//! wraps, which [`forward_object_store!`] writes out.
//!
//! # Why a macro inside the impl, not a trait of hooks
//!
//! A trait of hooks with default methods cannot carry the `ObjectStore` impl
//! itself: `impl<W: Hooks> ObjectStore for W` is a blanket impl of a foreign
//! trait, which Rust refuses (E0210), so each wrapper would still need a
//! macro to write its impl, plus a second set of methods named like
//! `ObjectStore`'s that collide with them wherever both traits are in scope
//! (every `use super::*` test module), and a second boxed future per call.
//! Here a wrapper keeps one ordinary `#[async_trait] impl ObjectStore`,
//! formatted and checked like any other, and the forwarding is one line in
//! it.
//!
//! # Why the forwarded methods are named, not implied
//!
//! Three of `ObjectStore`'s methods have defaults that do not forward:
//! `get_ranges` reads through `get_range`, `list_with_offset` lists
//! everything and filters, `rename_opts` copies and deletes. A wrapper that
//! left them out would lose the inner store's own implementation (a
//! pushed-down offset, an atomic rename) without a word. So every wrapper's
//! impl carries `#[deny(clippy::missing_trait_methods)]`, and each method is
//! either written (a hook) or named in the macro (forwarded unchanged): none
//! is ever left to a default, and none can be both (a second definition does
//! not compile). The `ObjectStoreExt` conveniences (`put`, `get`, `head`,
//! `delete`, `copy_if_not_exists`, ...) are not trait methods: they call the
//! methods above, so a hook on `put_opts` sees `put`, a hook on `get_opts`
//! sees `get`, `get_range` and `head`, a hook on `delete_stream` sees
//! `delete`.
//!
//! [`ObjectStore`]: object_store::ObjectStore

/// Writes, inside an `#[async_trait] impl ObjectStore for Wrapper`, the
/// named [`ObjectStore`] methods as calls of the same method of the field
/// the wrapper wraps, arguments unchanged.
///
/// The wrapper writes the methods it changes as usual and names the rest:
/// `forward_object_store!(self.inner => get_opts, list, ...);` where `inner`
/// is the field holding the wrapped store (any `ObjectStore`, an `Arc<dyn
/// ObjectStore>` included; a tuple field is `self.0`). Put
/// `#[deny(clippy::missing_trait_methods)]` on the impl, so that a method
/// neither written nor named is an error rather than `ObjectStore`'s default
/// (which for `get_ranges`, `list_with_offset` and `rename_opts` does not
/// reach the wrapped store's own implementation). A forwarded call reaches
/// the wrapped store when its future is first polled, as an `async fn` that
/// awaits it would.
///
/// The methods are `put_opts`, `put_multipart_opts`, `get_opts`,
/// `get_ranges`, `delete_stream`, `list`, `list_with_offset`,
/// `list_with_delimiter`, `copy_opts` and `rename_opts`: every method of
/// object_store 0.14's `ObjectStore`.
///
/// # Example
///
/// A store that makes every put an overwrite and forwards the rest:
///
/// ```
/// use async_trait::async_trait;
/// use memo_runtime::object_store::path::Path;
/// use memo_runtime::object_store::{
///     ObjectStore, PutMode, PutOptions, PutPayload, PutResult, Result, memory::InMemory,
/// };
/// use memo_runtime::testing::forward_object_store;
///
/// #[derive(Debug)]
/// struct Overwriting<T> {
///     inner: T,
/// }
///
/// impl<T: std::fmt::Display> std::fmt::Display for Overwriting<T> {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         write!(f, "Overwriting({})", self.inner)
///     }
/// }
///
/// #[async_trait]
/// #[deny(clippy::missing_trait_methods)]
/// impl<T: ObjectStore> ObjectStore for Overwriting<T> {
///     async fn put_opts(
///         &self,
///         location: &Path,
///         payload: PutPayload,
///         mut opts: PutOptions,
///     ) -> Result<PutResult> {
///         opts.mode = PutMode::Overwrite;
///         self.inner.put_opts(location, payload, opts).await
///     }
///
///     forward_object_store!(self.inner => put_multipart_opts, get_opts, get_ranges,
///         delete_stream, list, list_with_offset, list_with_delimiter, copy_opts, rename_opts);
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = Overwriting { inner: InMemory::new() };
/// let path = Path::from("k");
/// store.put_opts(&path, "a".into(), PutMode::Create.into()).await.unwrap();
/// store.put_opts(&path, "b".into(), PutMode::Create.into()).await.unwrap();
/// # }
/// ```
///
/// [`ObjectStore`]: object_store::ObjectStore
//
// `#[async_trait]` rewrites the impl before this macro expands, so an
// async method is written here as async_trait writes it (a boxed `Send`
// future that the borrowed arguments outlive): the trait's own declaration,
// expanded the same way, is what it must match. One line per method names
// its arguments; `@async` and `@stream` write the two shapes of method.
#[doc(hidden)]
#[macro_export]
macro_rules! __forward_object_store {
    (self.$field:tt => $($method:ident),+ $(,)?) => {
        $($crate::__forward_object_store!(@method $field $method);)+
    };
    (@method $f:tt put_opts) => { $crate::__forward_object_store!(@async $f put_opts ['l1]
        (location: &'l1 $crate::object_store::path::Path, payload: $crate::object_store::PutPayload,
         opts: $crate::object_store::PutOptions) -> $crate::object_store::PutResult); };
    (@method $f:tt put_multipart_opts) => { $crate::__forward_object_store!(@async $f
        put_multipart_opts ['l1] (location: &'l1 $crate::object_store::path::Path,
         opts: $crate::object_store::PutMultipartOptions)
        -> ::std::boxed::Box<dyn $crate::object_store::MultipartUpload>); };
    (@method $f:tt get_opts) => { $crate::__forward_object_store!(@async $f get_opts ['l1]
        (location: &'l1 $crate::object_store::path::Path, options: $crate::object_store::GetOptions)
        -> $crate::object_store::GetResult); };
    (@method $f:tt get_ranges) => { $crate::__forward_object_store!(@async $f get_ranges ['l1, 'l2]
        (location: &'l1 $crate::object_store::path::Path, ranges: &'l2 [::core::ops::Range<u64>])
        -> ::std::vec::Vec<$crate::__private::forward::Bytes>); };
    (@method $f:tt delete_stream) => { $crate::__forward_object_store!(@stream $f delete_stream
        (locations: $crate::__private::forward::BoxStream<'static,
            $crate::object_store::Result<$crate::object_store::path::Path>>)
        -> $crate::object_store::path::Path); };
    (@method $f:tt list) => { $crate::__forward_object_store!(@stream $f list
        (prefix: ::core::option::Option<&$crate::object_store::path::Path>)
        -> $crate::object_store::ObjectMeta); };
    (@method $f:tt list_with_offset) => { $crate::__forward_object_store!(@stream $f list_with_offset
        (prefix: ::core::option::Option<&$crate::object_store::path::Path>,
         offset: &$crate::object_store::path::Path) -> $crate::object_store::ObjectMeta); };
    (@method $f:tt list_with_delimiter) => { $crate::__forward_object_store!(@async $f
        list_with_delimiter ['l1] (prefix: ::core::option::Option<&'l1 $crate::object_store::path::Path>)
        -> $crate::object_store::ListResult); };
    (@method $f:tt copy_opts) => { $crate::__forward_object_store!(@async $f copy_opts ['l1, 'l2]
        (from: &'l1 $crate::object_store::path::Path, to: &'l2 $crate::object_store::path::Path,
         options: $crate::object_store::CopyOptions) -> ()); };
    (@method $f:tt rename_opts) => { $crate::__forward_object_store!(@async $f rename_opts ['l1, 'l2]
        (from: &'l1 $crate::object_store::path::Path, to: &'l2 $crate::object_store::path::Path,
         options: $crate::object_store::RenameOptions) -> ()); };
    (@method $f:tt $other:ident) => {
        ::core::compile_error!(::core::concat!(
            "`",
            ::core::stringify!($other),
            "` is not a method of `ObjectStore`; forward_object_store! forwards put_opts, \
             put_multipart_opts, get_opts, get_ranges, delete_stream, list, list_with_offset, \
             list_with_delimiter, copy_opts and rename_opts"
        ));
    };
    (@async $f:tt $name:ident [$($life:lifetime),*] ($($arg:ident: $ty:ty),*) -> $out:ty) => {
        fn $name<'l0, $($life,)* 'async_trait>(&'l0 self, $($arg: $ty),*) -> ::core::pin::Pin<
            ::std::boxed::Box<
                dyn ::core::future::Future<Output = $crate::object_store::Result<$out>>
                    + ::core::marker::Send
                    + 'async_trait,
            >,
        >
        where
            'l0: 'async_trait,
            $($life: 'async_trait,)*
            Self: 'async_trait,
        {
            ::std::boxed::Box::pin(async move {
                $crate::object_store::ObjectStore::$name(&self.$f, $($arg),*).await
            })
        }
    };
    (@stream $f:tt $name:ident ($($arg:ident: $ty:ty),*) -> $item:ty) => {
        fn $name(&self, $($arg: $ty),*)
            -> $crate::__private::forward::BoxStream<'static, $crate::object_store::Result<$item>>
        {
            $crate::object_store::ObjectStore::$name(&self.$f, $($arg),*)
        }
    };
}

/// The name the crate's own wrappers use (users name it
/// `memo_runtime::testing::forward_object_store`).
pub(crate) use crate::__forward_object_store as forward_object_store;

/// The types [`forward_object_store!`]'s
/// expansion names that `object_store` does not export, as
/// `memo_runtime::__private::forward`.
#[doc(hidden)]
pub mod expansion {
    pub use bytes::Bytes;
    pub use futures::stream::BoxStream;
}

#[cfg(test)]
mod tests {
    use std::fmt;
    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;
    use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
    use object_store::local::LocalFileSystem;
    use object_store::memory::InMemory;
    use object_store::path::Path;
    use object_store::{
        CopyOptions, GetOptions, GetResult, MultipartUpload, ObjectStore, ObjectStoreExt, PutMode,
        PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
    };

    use super::forward_object_store;
    use crate::testing::{CountingStore, RequestCounts, exercise_every_method};

    /// Forwards every method.
    #[derive(Debug)]
    struct Transparent<T>(T);

    impl<T: fmt::Display> fmt::Display for Transparent<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "Transparent({})", self.0)
        }
    }

    #[async_trait]
    #[deny(clippy::missing_trait_methods)]
    impl<T: ObjectStore> ObjectStore for Transparent<T> {
        forward_object_store!(self.0 => put_opts, put_multipart_opts, get_opts, get_ranges,
            delete_stream, list, list_with_offset, list_with_delimiter, copy_opts, rename_opts);
    }

    /// Records the methods its hooks see (the writes, the gets, the deletes,
    /// the copies) and forwards the rest.
    #[derive(Debug)]
    struct Hooked<T> {
        inner: T,
        seen: Arc<Mutex<Vec<&'static str>>>,
    }

    impl<T> Hooked<T> {
        fn saw(&self, method: &'static str) {
            self.seen.lock().unwrap().push(method);
        }
    }

    impl<T: fmt::Display> fmt::Display for Hooked<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "Hooked({})", self.inner)
        }
    }

    #[async_trait]
    #[deny(clippy::missing_trait_methods)]
    impl<T: ObjectStore> ObjectStore for Hooked<T> {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            opts: PutOptions,
        ) -> Result<PutResult> {
            self.saw("put_opts");
            self.inner.put_opts(location, payload, opts).await
        }

        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: PutMultipartOptions,
        ) -> Result<Box<dyn MultipartUpload>> {
            self.saw("put_multipart_opts");
            self.inner.put_multipart_opts(location, opts).await
        }

        async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
            self.saw("get_opts");
            self.inner.get_opts(location, options).await
        }

        fn delete_stream(
            &self,
            locations: BoxStream<'static, Result<Path>>,
        ) -> BoxStream<'static, Result<Path>> {
            self.saw("delete_stream");
            self.inner.delete_stream(locations)
        }

        async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
            self.saw("copy_opts");
            self.inner.copy_opts(from, to, options).await
        }

        forward_object_store!(self.inner => get_ranges, list, list_with_offset,
            list_with_delimiter, rename_opts);
    }

    #[tokio::test]
    async fn forwarded_methods_reach_the_inner_stores_own_implementation() {
        // Had a method been left to `ObjectStore`'s default, the inner store
        // would count `gets` for `get_ranges`, a `list` for
        // `list_with_offset`, a copy and a delete for `rename_opts`.
        let store = Transparent(CountingStore::new(InMemory::new()));
        let expected = exercise_every_method(&store).await;
        assert_eq!(store.0.counts(), expected);

        let dir = tempfile::tempdir().unwrap();
        let local = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let store = Transparent(CountingStore::new(local));
        let expected = exercise_every_method(&store).await;
        assert_eq!(store.0.counts(), expected);
    }

    #[tokio::test]
    async fn a_hook_sees_every_call_that_reaches_its_method_and_only_those() {
        let seen = Arc::default();
        let hooked = Arc::new(Hooked {
            inner: CountingStore::new(InMemory::new()),
            seen: Arc::clone(&seen),
        });
        let store: Arc<dyn ObjectStore> = hooked.clone();
        let (a, b, c) = (Path::from("a"), Path::from("b"), Path::from("c"));

        store.put(&a, "1".into()).await.unwrap();
        let create = PutMode::Create.into();
        store.put_opts(&b, "2".into(), create).await.unwrap();
        store
            .put_multipart(&c)
            .await
            .unwrap()
            .abort()
            .await
            .unwrap();
        let options = PutMultipartOptions::default();
        let mut upload = store.put_multipart_opts(&c, options).await.unwrap();
        upload.abort().await.unwrap();
        store.get(&a).await.unwrap();
        store.get_range(&a, 0..1).await.unwrap();
        store.head(&a).await.unwrap();
        store.get_opts(&a, GetOptions::default()).await.unwrap();
        store.copy(&a, &c).await.unwrap();
        store
            .copy_if_not_exists(&a, &Path::from("d"))
            .await
            .unwrap();
        store.delete(&c).await.unwrap();
        let one = stream::iter([Ok(Path::from("d"))]).boxed();
        store
            .delete_stream(one)
            .try_collect::<Vec<_>>()
            .await
            .unwrap();
        let after_hooks = seen.lock().unwrap().clone();
        assert_eq!(
            after_hooks,
            [
                ["put_opts"; 2].as_slice(),
                &["put_multipart_opts"; 2],
                &["get_opts"; 4],
                &["copy_opts"; 2],
                &["delete_stream"; 2],
            ]
            .concat()
        );

        // The forwarded methods pass no hook.
        store.get_ranges(&a, &[0..1, 0..1]).await.unwrap();
        store.list(None).try_collect::<Vec<_>>().await.unwrap();
        let listed = store.list_with_offset(None, &a);
        listed.try_collect::<Vec<_>>().await.unwrap();
        store.list_with_delimiter(None).await.unwrap();
        store.rename(&a, &c).await.unwrap();
        assert_eq!(*seen.lock().unwrap(), after_hooks);

        // Every call reached the inner store as the method it was made as.
        assert_eq!(
            hooked.inner.counts(),
            RequestCounts {
                puts: 1,
                creates: 1,
                bytes_put: 2,
                multipart_uploads: 2,
                gets: 3,
                heads: 1,
                copies: 2,
                delete_streams: 2,
                delete_paths: 2,
                get_ranges: 1,
                lists: 1,
                lists_with_offset: 1,
                lists_with_delimiter: 1,
                // `a` and `b` by each listing, but `a` not after itself.
                objects_listed: 5,
                renames: 1,
                ..RequestCounts::default()
            }
        );
    }
}
