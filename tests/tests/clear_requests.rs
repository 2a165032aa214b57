//! What clearing a run costs in requests: one listing and one delete
//! stream per folder (memo entries, step outputs), whatever the number of
//! entries. On S3 a listing is one request per 1,000 objects and a delete
//! stream one `DeleteObjects` request per 1,000 paths, so a run of `a` memo
//! entries and `b` step outputs costs at most
//! `2⌈a/1000⌉ + 2⌈b/1000⌉ ≤ 2⌈n/1000⌉ + 2` requests (BENCHMARKS.md).

use std::sync::Arc;

use memo_runtime::object_store::memory::InMemory;
use memo_runtime::testing::{CountingStore, write_legacy_step_output};
use memo_runtime::{Incarnation, MemoStore};
use memo_tests::fixtures::run;

#[tokio::test]
async fn clearing_a_run_lists_each_folder_once_and_deletes_in_one_stream_each() {
    for (memos, outputs) in [(100u32, 0u32), (1_500, 700)] {
        let counting = Arc::new(CountingStore::new(InMemory::new()));
        let store = MemoStore::new(counting.clone(), "memo");
        let run = run(&format!("run-{memos}"));
        let memo = store.memo_for(&run, Incarnation::from_u64(3), 0);
        for key in 0..memos {
            memo.content_put(&key, b"v").await.unwrap();
        }
        for payload in 0..outputs {
            let inc = Incarnation::from_u64(3);
            write_legacy_step_output(&store, &run, inc, 0, &payload.to_le_bytes(), b"out")
                .await
                .unwrap();
        }
        counting.reset();
        let cleared = store
            .clear_incarnation(&run, Incarnation::from_u64(3))
            .await
            .unwrap();
        assert_eq!(cleared, (memos + outputs) as usize);
        let c = counting.counts();
        assert_eq!((c.lists, c.delete_streams), (2, 2), "{c:?}");
        assert_eq!(c.objects_listed, u64::from(memos + outputs), "{c:?}");
        assert_eq!(c.delete_paths, u64::from(memos + outputs), "{c:?}");
        assert_eq!((c.gets, c.heads, c.creates, c.puts), (0, 0, 0, 0), "{c:?}");
    }
}
