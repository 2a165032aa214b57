//! Goldens of the records this backend stores whole: the run pointer (and
//! its per-incarnation copy), the run record that every checkpoint holds,
//! and the cost ledger's entry in a run's terminal log entry and
//! checkpoint. A failing golden means stored runs would no longer read.

use bytes::Bytes;

use super::Creation;
use crate::codec;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::state::{Change, Verdict};
use crate::runtime_store::{AttemptCost, Commit, NewRun, RunRecord, StatusChange, Usage};

fn new_run(workflow_version: Option<&str>) -> NewRun {
    NewRun {
        run_id: RunId::new("r1").unwrap(),
        workflow: "w".into(),
        input: Bytes::from_static(b"\xc0"),
        created_at_ms: 7,
        workflow_version: workflow_version.map(str::to_string),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// A run pointer as every memo before workflow versions wrote it:
/// `{run: {run_id: "r1", workflow: "w", input: bin(c0), created_at_ms: 7},
/// incarnation: 1}`.
const POINTER_BEFORE_VERSIONS: &str = "82a372756e84a672756e5f6964a27231a8776f726b666c6f77a177\
     a5696e707574c401c0ad637265617465645f61745f6d7307ab696e6361726e6174696f6e01";

/// The same run started on version "2": one more field in `run`,
/// `workflow_version: "2"`.
const POINTER_OF_VERSION_2: &str = "82a372756e85a672756e5f6964a27231a8776f726b666c6f77a177\
     a5696e707574c401c0ad637265617465645f61745f6d7307b0776f726b666c6f775f76657273696f6e\
     a132ab696e6361726e6174696f6e01";

fn creation(workflow_version: Option<&str>) -> Creation {
    Creation {
        run: new_run(workflow_version),
        incarnation: Incarnation::from_u64(1),
    }
}

#[test]
fn a_run_pointer_from_before_versions_reads_as_a_run_with_no_version() {
    let old: Creation = codec::decode(&unhex(POINTER_BEFORE_VERSIONS)).unwrap();
    assert_eq!(old.run, new_run(None));
    assert_eq!(old.incarnation, Incarnation::from_u64(1));
}

#[test]
fn a_run_with_no_version_is_stored_as_before_versions() {
    assert_eq!(
        hex(&codec::encode(&creation(None)).unwrap()),
        POINTER_BEFORE_VERSIONS,
        "the stored run pointer changed"
    );
}

#[test]
fn the_run_pointer_of_a_versioned_run_is_pinned() {
    let bytes = codec::encode(&creation(Some("2"))).unwrap();
    assert_eq!(
        hex(&bytes),
        POINTER_OF_VERSION_2,
        "the stored run pointer changed"
    );
    let read: Creation = codec::decode(&bytes).unwrap();
    assert_eq!(read.run.workflow_version.as_deref(), Some("2"));
}

/// What a deletion of incarnation 1 leaves at the run's pointer, and a
/// recheck's mark on it before its delete: plain text, not a frame (a
/// frame begins with `MEMO`), so that a release before vacated pointers
/// refuses it as corrupt rather than reading a run into it.
#[test]
fn a_vacated_run_pointer_is_pinned() {
    let incarnation = Incarnation::from_u64(1);
    assert_eq!(
        &super::pointer::vacated(incarnation)[..],
        b"vacant 0000000000000001"
    );
    let swept = super::pointer::swept(incarnation, 0xab, None);
    assert_eq!(
        &swept[..],
        b"vacant 0000000000000001 swept 00000000000000ab"
    );
    assert!(swept.starts_with(crate::write_once::VACANT));
    assert!(crate::write_once::is_swept(&swept));
    assert_eq!(super::pointer::swept_at(&swept), None);
    let dated = super::pointer::swept(incarnation, 0xab, Some(1_767_225_600_000));
    assert_eq!(
        &dated[..],
        b"vacant 0000000000000001 swept 00000000000000ab at 1767225600000"
    );
    assert_eq!(super::pointer::swept_at(&dated), Some(1_767_225_600_000));
    // A pointer only vacated is not marked, and a mark's time must be one.
    assert!(!crate::write_once::is_swept(&super::pointer::vacated(
        incarnation
    )));
    assert_eq!(
        super::pointer::swept_at(&super::pointer::vacated(incarnation)),
        None
    );
    assert_eq!(
        super::pointer::swept_at(b"vacant 0000000000000001 swept 00000000000000ab at +1"),
        None
    );
}

#[test]
fn a_dated_tombstone_is_pinned() {
    use super::pointer::{tombstone, tombstone_time};
    assert_eq!(tombstone(Some(1_767_225_600_000)), b"1767225600000");
    assert_eq!(tombstone(Some(0)), b"0");
    assert_eq!(tombstone(Some(u64::MAX)), b"18446744073709551615");
    assert_eq!(tombstone(None), b"");
    assert_eq!(tombstone_time(b"1767225600000"), Some(1_767_225_600_000));
    assert_eq!(tombstone_time(b"18446744073709551615"), Some(u64::MAX));
    // Older releases' tombstones, and whatever else: no time.
    assert_eq!(tombstone_time(b""), None);
    for other in [
        &b"+1"[..],
        b"-1",
        b" 1",
        b"1 ",
        b"18446744073709551616",
        b"\xff",
    ] {
        assert_eq!(tombstone_time(other), None, "{other:?}");
    }
}

fn record(workflow_version: Option<&str>) -> RunRecord {
    let state = crate::runtime_store::state::RunState::new(
        new_run(workflow_version),
        Incarnation::from_u64(1),
    );
    state.record().clone()
}

#[test]
fn the_run_record_of_a_checkpoint_keeps_the_version_and_reads_old_ones_as_none() {
    let old = codec::encode(&record(None)).unwrap();
    assert!(
        !old.windows(16).any(|w| w == b"workflow_version"),
        "a run with no version is stored as before versions"
    );
    assert_eq!(codec::decode::<RunRecord>(&old).unwrap(), record(None));
    let new = codec::encode(&record(Some("2"))).unwrap();
    assert!(
        hex(&new).ends_with("b0776f726b666c6f775f76657273696f6ea132"),
        "{}",
        hex(&new)
    );
    assert_eq!(codec::decode::<RunRecord>(&new).unwrap(), record(Some("2")));
}

fn small_cost() -> AttemptCost {
    AttemptCost {
        attempt: 1,
        recorded_at_ms: 9,
        usage: Usage {
            gets: 2,
            puts: 3,
            ..Usage::default()
        },
    }
}

fn ending(cost: Option<AttemptCost>) -> Change {
    let done = StatusChange::Completed {
        output: Bytes::from_static(b"\x2a"),
    };
    let commit = Commit::status(done, 8);
    Change::Commit(Box::new(match cost {
        Some(cost) => commit.with_cost(cost),
        None => commit,
    }))
}

/// The log entry of a run's end as every memo before the cost ledger moved
/// into it wrote it: `{Commit: {at_ms: 8, receipt: nil, snapshot: nil,
/// input_updates: [], status: {Completed: {output: bin(2a)}}, fence: nil}}`.
const END_WITHOUT_COST: &str = "81a6436f6d6d697486a561745f6d7308a772656365697074c0a8736e6170\
     73686f74c0ad696e7075745f7570646174657390a6737461747573\
     81a9436f6d706c6574656481a66f7574707574c4012aa566656e6365c0";

#[test]
fn an_end_without_a_cost_is_stored_as_before_and_one_with_a_cost_adds_one_field() {
    let without = codec::encode(&ending(None)).unwrap();
    assert_eq!(hex(&without), END_WITHOUT_COST.replace(' ', ""));
    let with = codec::encode(&ending(Some(small_cost()))).unwrap();
    // The same map with one field more, `cost`, the attempt's cost record
    // as it is stored on its own (pinned in `runtime_store/cost.rs`).
    let cost = codec::encode(&small_cost()).unwrap();
    let expected = format!(
        "81a6436f6d6d697487{}a4636f7374{}",
        &END_WITHOUT_COST.replace(' ', "")[18..],
        hex(&cost)
    );
    assert_eq!(hex(&with), expected);
    assert_eq!(
        codec::decode::<Change>(&with).unwrap(),
        ending(Some(small_cost()))
    );
    assert_eq!(codec::decode::<Change>(&without).unwrap(), ending(None));

    // A release before the field reads the entry, the cost ignored.
    #[derive(serde::Deserialize)]
    enum Before {
        Commit(CommitBefore),
    }
    #[derive(serde::Deserialize)]
    struct CommitBefore {
        at_ms: u64,
        status: Option<StatusChange>,
    }
    let Before::Commit(old) = codec::decode::<Before>(&with).unwrap();
    assert_eq!(old.at_ms, 8);
    assert!(matches!(old.status, Some(StatusChange::Completed { .. })));
}

#[test]
fn a_checkpoint_of_an_ended_run_keeps_its_ending_cost_and_reads_old_ones_without() {
    let mut state =
        crate::runtime_store::state::RunState::new(new_run(None), Incarnation::from_u64(1));
    let start = Change::Commit(Box::new(Commit::status(StatusChange::start_attempt(1), 8)));
    for change in [start, ending(Some(small_cost()))] {
        let Verdict::Apply(approval) = state.check(&change).unwrap() else {
            panic!("{change:?} applies");
        };
        state.apply(change, approval);
    }
    assert_eq!(state.ending_cost(), Some(&small_cost()));
    let bytes = codec::encode(&state).unwrap();
    let field = format!(
        "ab656e64696e675f636f7374{}",
        hex(&codec::encode(&small_cost()).unwrap())
    );
    assert!(hex(&bytes).ends_with(&field), "{}", hex(&bytes));
    let read: crate::runtime_store::state::RunState = codec::decode(&bytes).unwrap();
    assert_eq!(read.ending_cost(), Some(&small_cost()));
    assert!(read.check_stored(0).is_ok());

    // Without the field (a checkpoint written before it): no cost.
    let without = bytes.len() - field.len() / 2;
    let mut old = bytes[..without].to_vec();
    old[0] -= 1; // one field fewer in the map's header
    let read: crate::runtime_store::state::RunState = codec::decode(&old).unwrap();
    assert_eq!(read.ending_cost(), None);
    assert_eq!(read.record(), state.record());
}
