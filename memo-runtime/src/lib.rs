//! memo: durable, retry-safe steps over object storage.
#![warn(missing_docs, unreachable_pub)]
#![deny(rustdoc::broken_intra_doc_links)]

mod error;
mod run_id;

pub use bytes::Bytes;
pub use error::{Error, Result};
pub use object_store;
pub use run_id::{MAX_RUN_ID_LEN, RunId};
mod envelope;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod write_once;
