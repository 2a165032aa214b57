//! The RuntimeStore conformance suite on every embedded backend: the
//! in-memory store, and the object-store store on InMemory, on a local
//! folder (at a prefix and at the root) and behind a PrefixStore, with the
//! object-storage checks for corrupt records and injected faults.

use std::sync::Arc;

use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::local::LocalFileSystem;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::prefix::PrefixStore;
use memo_runtime::testing::FaultInjectingStore;
use memo_runtime::testing::runtime_store as suite;
use memo_runtime::{InMemoryRuntimeStore, ObjectStoreRuntimeStore};

fn local(dir: &tempfile::TempDir) -> Arc<dyn ObjectStore> {
    Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_the_in_memory_store() {
    let store = InMemoryRuntimeStore::new();
    suite::run_all(|| store.clone()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_object_store_in_memory() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let make = || ObjectStoreRuntimeStore::new(objects.clone(), "memo");
    suite::run_all(make).await;
    suite::corrupt_records_are_errors(&make).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_object_store_on_a_local_folder() {
    let dir = tempfile::tempdir().unwrap();
    let make = || ObjectStoreRuntimeStore::new(local(&dir), "memo");
    suite::run_all(make).await;
    suite::corrupt_records_are_errors(&make).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_object_store_at_the_root_of_a_local_folder() {
    let dir = tempfile::tempdir().unwrap();
    let make = || ObjectStoreRuntimeStore::new(local(&dir), "");
    suite::run_all(make).await;
    suite::corrupt_records_are_errors(&make).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_object_store_behind_a_prefix_store() {
    let objects = Arc::new(InMemory::new());
    let make = || {
        let tenant = Arc::new(PrefixStore::new(objects.clone(), "tenant/a"));
        ObjectStoreRuntimeStore::new(tenant, "memo")
    };
    suite::run_all(make).await;
    suite::corrupt_records_are_errors(&make).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn faults_never_leave_a_partial_commit_in_memory() {
    let faults = Arc::new(FaultInjectingStore::new(InMemory::new()).with_seed(7));
    let make = || ObjectStoreRuntimeStore::new(faults.clone(), "memo");
    suite::faults_never_leave_a_partial_commit(&make, &faults).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn faults_never_leave_a_partial_commit_on_a_local_folder() {
    let dir = tempfile::tempdir().unwrap();
    let folder = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    let faults = Arc::new(FaultInjectingStore::new(folder).with_seed(11));
    let make = || ObjectStoreRuntimeStore::new(faults.clone(), "memo");
    suite::faults_never_leave_a_partial_commit(&make, &faults).await;
}
