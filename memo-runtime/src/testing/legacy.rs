//! Data as earlier versions of memo wrote it, for tests that check it is
//! still read or cleared.

use bytes::Bytes;
use object_store::path::Path;

use crate::error::Result;
use crate::key::sha256_hex;
use crate::layout::STEP_OUTPUTS;
use crate::memo::MemoStore;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::write_once;

/// What a step-output entry could hold: what a memo entry can.
fn limit(store: &MemoStore) -> Limit {
    Limit::memo_entry(store.max_value_size())
}

/// The path of a step-output entry (`step-outputs/<run>/<inc>/<step>/<sha256(payload)>`).
fn step_output_path(
    store: &MemoStore,
    run_id: &RunId,
    incarnation: Incarnation,
    step: u32,
    payload: &[u8],
) -> Path {
    store.layout().entry(
        STEP_OUTPUTS,
        run_id,
        incarnation,
        step,
        &sha256_hex(payload),
    )
}

/// Writes a step-output entry as versions before step receipts did
/// (`MemoStore::put_step_output`, now removed), so a test can check that
/// clears and sweeps still delete such entries.
///
/// # Errors
///
/// As a memo entry's write.
pub async fn write_legacy_step_output(
    store: &MemoStore,
    run_id: &RunId,
    incarnation: Incarnation,
    step: u32,
    payload: &[u8],
    value: &[u8],
) -> Result<()> {
    let path = step_output_path(store, run_id, incarnation, step, payload);
    write_once::create_once(
        store.store(),
        &path,
        value,
        limit(store),
        &store.seal().for_run(run_id, incarnation),
    )
    .await?;
    Ok(())
}

/// The step-output entry [`write_legacy_step_output`] wrote, if it is still
/// there.
///
/// # Errors
///
/// As a memo entry's read.
pub async fn read_legacy_step_output(
    store: &MemoStore,
    run_id: &RunId,
    incarnation: Incarnation,
    step: u32,
    payload: &[u8],
) -> Result<Option<Bytes>> {
    let path = step_output_path(store, run_id, incarnation, step, payload);
    write_once::read(
        store.store(),
        &path,
        limit(store),
        &store.seal().for_run(run_id, incarnation),
    )
    .await
}
