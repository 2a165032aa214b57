//! Goldens of the records this backend stores whole: the run pointer (and
//! its per-incarnation copy), and the run record that every checkpoint
//! holds. A failing golden means stored runs would no longer read.

use bytes::Bytes;

use super::Creation;
use crate::codec;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{NewRun, RunRecord};

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
