//! Large values (`memo_runtime::blob`) on every embedded backend: a value
//! over the in-memory limit round-trips through a `#[memoized]` function
//! and a workflow step, a second call is a hit that streams it again, every
//! seal reads it back, a blob copied elsewhere does not read, and clearing
//! or sweeping its run deletes it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::TryStreamExt;
use memo_runtime::blob::Blob;
use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt};
use memo_runtime::seal::{Compression, Seal};
use memo_runtime::store::LocalFolder;
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Error, MemoStore};
use memo_tests::fixtures::{Backend, every_seal_option, run, unique_run};
use memo_tests::large_values::{Generated, OVER_64_MIB, assert_reads_back, export, read_back};

/// Every blob object of `store`: those in a `blobs` folder under `memos/`.
async fn blob_objects(store: &MemoStore) -> Vec<Path> {
    let prefix = store.prefix().clone().join("memos");
    let mut blobs: Vec<Path> = store
        .object_store()
        .list(Some(&prefix))
        .map_ok(|meta| meta.location)
        .try_filter(|path| {
            futures::future::ready(path.parts().any(|part| part.as_ref() == "blobs"))
        })
        .try_collect()
        .await
        .unwrap();
    blobs.sort();
    blobs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_over_the_limit_round_trips_through_a_memoized_function_and_a_hit_streams_it_again()
{
    let value = Generated::random(OVER_64_MIB, 1);
    let expected = (value, &*value.sha256());
    for backend in Backend::all() {
        let what = backend.name();
        let store = backend.memo_store("memo");
        assert!(value.len > store.max_value_size() as u64 * 4);
        let memo = store.new_memo(&run("export"), 0);
        let runs = AtomicU32::new(0);

        let blob = export(&memo, &value, &runs).await.unwrap();
        assert_eq!(blob.size(), value.len, "{what}");
        assert_reads_back(&blob, &store, expected, what).await;

        // A hit: the body does not run again, the reference is the one
        // committed, and the value streams again from the store, here read
        // by another client of the same objects.
        let again = export(&memo, &value, &runs).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{what}");
        assert_eq!(again, blob, "{what}");
        let other_process = MemoStore::new(backend.open(), "memo");
        assert_reads_back(&again, &other_process, expected, what).await;
        assert_eq!(blob_objects(&store).await.len(), 1, "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_step_returns_a_large_value_and_a_replay_returns_its_reference() {
    let value = Generated::random(OVER_64_MIB, 2);
    let expected = (value, &*value.sha256());
    for backend in Backend::all() {
        let what = backend.name();
        let runtime = Runtime::builder()
            .memo_store(backend.memo_store("memo"))
            .runtime_store(Arc::new(backend.runtime_store("memo")))
            .build()
            .unwrap();
        let bodies = Arc::new(AtomicU32::new(0));
        let workflow = Workflow::new("archive", {
            let bodies = bodies.clone();
            move |ctx: Context, value: Generated| {
                let bodies = bodies.clone();
                async move {
                    let blob: Blob = ctx
                        .step("write", |memo| {
                            let bodies = bodies.clone();
                            async move {
                                bodies.fetch_add(1, Ordering::SeqCst);
                                value.write(&memo).await
                            }
                        })
                        .await?;
                    // A later step reads what an earlier one wrote.
                    let store = ctx.memo_store().clone();
                    let read = ctx
                        .step("digest", |_memo| {
                            let (blob, store) = (blob.clone(), store.clone());
                            async move { Ok::<_, Error>(read_back(&blob, &store).await?.sha256) }
                        })
                        .await?;
                    Ok::<_, Error>((blob, read))
                }
            }
        });
        let id = run("archive-1");
        let (blob, digest) = runtime.run(&id, &value, &workflow).await.unwrap();
        assert_eq!(digest, expected.1, "{what}");
        assert_eq!(blob.run_id(), &id);

        // The ended run again: its output is replayed, no step runs.
        let (replayed, _) = runtime.run(&id, &value, &workflow).await.unwrap();
        assert_eq!(replayed, blob, "{what}");
        assert_eq!(bodies.load(Ordering::SeqCst), 1, "{what}");
        assert_reads_back(&replayed, runtime.memo_store(), expected, what).await;
    }
}

/// Every seal reads a value of several chunks back, and compression shrinks
/// a compressible value and nothing else. A seal is a layer above the object
/// store, so every seal runs on one backend (in memory) and every other
/// backend stores and reads back the chunks of a compressed value. The
/// cipher is what costs in a debug build (its generic code is compiled
/// unoptimized where memo-runtime uses it): encrypting on every backend took
/// twice the time of this test for no path of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_and_encrypted_blobs_read_back_and_compression_shrinks_them() {
    let compressible = Generated::compressible(17 << 20, 3);
    let random = Generated::random(17 << 20, 4);
    let digests = [compressible.sha256(), random.sha256()];
    let seals = [
        (Seal::plain(), "plain"),
        (
            Seal::plain().with_compression(Compression::default()),
            "compressed",
        ),
        (every_seal_option(), "compressed and encrypted"),
    ];
    let backends = Backend::all();
    assert_eq!(backends[0].name(), Backend::in_memory().name());
    for (i, backend) in backends.iter().enumerate() {
        let seals = if i == 0 { &seals[..] } else { &seals[1..2] };
        for (seal, name) in seals {
            let what = format!("{}, {name}", backend.name());
            let store = backend.memo_store(name).with_seal(seal.clone());
            let memo = store.new_memo(&unique_run("sealed"), 0);
            for (value, sha256) in [compressible, random].into_iter().zip(&digests) {
                let blob = value.write(&memo).await.unwrap();
                assert_reads_back(&blob, &store, (value, sha256), &what).await;
                let stored = store
                    .object_store()
                    .head(&blob.path(&store))
                    .await
                    .unwrap()
                    .size;
                let shrunk = stored < value.len / 10;
                let compresses = *name != "plain" && value.compressible;
                assert_eq!(shrunk, compresses, "{what}: {stored} bytes stored");
            }
        }
    }
}

#[tokio::test]
async fn a_blob_copied_to_another_run_or_store_does_not_read_there() {
    for backend in Backend::all() {
        let what = backend.name();
        let store = backend.memo_store("memo").with_seal(every_seal_option());
        let value = Generated::random(300_000, 5);
        let blob = value.write(&store.new_memo(&run("from"), 0)).await.unwrap();
        let other = value.write(&store.new_memo(&run("to"), 0)).await.unwrap();
        // Another run's blob object replaced by a copy of the first's.
        store
            .object_store()
            .copy(&blob.path(&store), &other.path(&store))
            .await
            .unwrap();
        let error = read_back(&other, &store).await.unwrap_err();
        assert!(
            matches!(&error, Error::Corrupt { path, reason }
                if *path == other.path(&store).to_string() && reason.contains("chunk 0")),
            "{what}: {error}"
        );
        // The same objects read by a store with another key.
        let elsewhere = backend.memo_store("memo").with_seal(
            Seal::default().with_encryption(memo_runtime::seal::Keyring::new(1, [1; 32]).unwrap()),
        );
        let error = read_back(&blob, &elsewhere).await.unwrap_err();
        assert!(matches!(error, Error::Corrupt { .. }), "{what}: {error}");
    }
}

#[tokio::test]
async fn clearing_a_run_deletes_its_blobs_and_its_references_then_read_as_missing() {
    for backend in Backend::all() {
        let what = backend.name();
        let store = backend.memo_store("memo");
        let (cleared, kept) = (run("cleared"), run("kept"));
        let value = Generated::random(200_000, 6);
        let expected = (value, &*value.sha256());
        let runs = AtomicU32::new(0);
        let blob = export(&store.new_memo(&cleared, 1), &value, &runs)
            .await
            .unwrap();
        let kept_blob = export(&store.new_memo(&kept, 1), &value, &runs)
            .await
            .unwrap();
        assert_eq!(blob_objects(&store).await.len(), 2, "{what}");
        // A run's entries are its memo entries; its blobs are not listed.
        let entries = store
            .list_entries(&kept, memo_runtime::Incarnation::STANDALONE)
            .await
            .unwrap();
        assert_eq!(entries.len(), 1, "{what}: {entries:?}");

        store.clear_memos_for_run(&cleared).await.unwrap();
        assert_eq!(
            blob_objects(&store).await,
            [kept_blob.path(&store)],
            "{what}"
        );
        let error = read_back(&blob, &store).await.unwrap_err();
        assert!(
            matches!(&error, Error::Corrupt { reason, .. } if reason.contains("missing")),
            "{what}: {error}"
        );
        assert_reads_back(&kept_blob, &store, expected, what).await;
    }
}

#[tokio::test]
async fn sweeping_a_workflow_run_deletes_its_blobs() {
    const START_MS: u64 = 1_000 * 3_600_000;
    for backend in Backend::all() {
        let what = backend.name();
        let clock = Arc::new(ManualClock::new(START_MS));
        let runtime = Runtime::builder()
            .memo_store(backend.memo_store("memo"))
            .runtime_store(Arc::new(backend.runtime_store("memo")))
            .clock(clock.clone())
            .retention(Duration::from_secs(3600))
            .build()
            .unwrap();
        let workflow = Workflow::new("archive", |ctx: Context, value: Generated| async move {
            ctx.step("write", |memo| async move { value.write(&memo).await })
                .await
        });
        let value = Generated::random(100_000, 7);
        let blob = runtime.run(&run("swept"), &value, &workflow).await.unwrap();
        assert_eq!(blob_objects(runtime.memo_store()).await.len(), 1, "{what}");

        clock.advance_ms(2 * 3_600_000);
        runtime
            .retention_sweeper()
            .sweep_once(START_MS + 2 * 3_600_000)
            .await
            .unwrap();
        assert!(
            blob_objects(runtime.memo_store()).await.is_empty(),
            "{what}"
        );
        let error = read_back(&blob, runtime.memo_store()).await.unwrap_err();
        assert!(
            matches!(&error, Error::Corrupt { reason, .. } if reason.contains("missing")),
            "{what}: {error}"
        );
    }
}

/// Fails after writing `fail_after` bytes of `value`, or returns its blob.
#[memo_runtime::memoized(skip(fail_after, runs))]
async fn export_or_fail(
    memo: &memo_runtime::Memo,
    value: &Generated,
    fail_after: Option<usize>,
    runs: &AtomicU32,
) -> Result<Blob, Error> {
    runs.fetch_add(1, Ordering::SeqCst);
    let mut writer = memo_runtime::blob::BlobWriter::new(memo).with_chunk_size(64 * 1024)?;
    let mut written = 0;
    for piece in value.pieces() {
        for part in piece.chunks(100_000) {
            if fail_after.is_some_and(|limit| written >= limit) {
                // The writer is dropped unfinished: its upload is aborted.
                return Err(Error::InvalidConfig {
                    what: "test".into(),
                    reason: "the body failed mid-value".into(),
                });
            }
            writer.write(part).await?;
            written += part.len();
        }
    }
    writer.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_fails_mid_value_commits_nothing_and_leaves_no_blob_behind() {
    let folder = tempfile::tempdir().unwrap();
    let local = LocalFolder::new(folder.path()).unwrap();
    for (store, folder, what) in [
        (
            MemoStore::new(Arc::new(InMemory::new()), "memo"),
            None,
            "in memory",
        ),
        (
            MemoStore::new(Arc::new(local), "memo"),
            Some(folder.path()),
            "local folder",
        ),
    ] {
        let memo = store.new_memo(&run("half"), 0);
        let value = Generated::random(1 << 20, 8);
        let runs = AtomicU32::new(0);

        let failed = export_or_fail(&memo, &value, Some(600_000), &runs).await;
        assert!(failed.is_err(), "{what}");
        // Nothing committed: the next call runs the body again, and its
        // blob is the only one left once the dropped upload is aborted.
        let blob = export_or_fail(&memo, &value, None, &runs).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 2, "{what}");
        assert_reads_back(&blob, &store, (value, &value.sha256()), what).await;
        let mut left = blob_objects(&store).await;
        for _ in 0..200 {
            if left.len() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            left = blob_objects(&store).await;
        }
        assert_eq!(left, [blob.path(&store)], "{what}");
        if let Some(folder) = folder {
            let files = walk(folder);
            assert_eq!(files.len(), 1, "{what}: no staging file is left: {files:?}");
        }
    }
}

/// Every file in a `blobs` folder under `folder`'s `memo/memos`, staging
/// files included.
fn walk(folder: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![folder.join("memo/memos")];
    while let Some(dir) = folders.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.parent().is_some_and(|p| p.ends_with("blobs")) {
                files.push(path);
            }
        }
    }
    files
}
