//! `memoctl keys`: which encryption keys the store's objects need, so that
//! a key version is dropped from a key file only once nothing needs it.

use std::process::ExitCode;

use anyhow::Context as _;
use memo_runtime::seal::KeyUsage;
use serde_json::json;

use crate::output::{outln, print_json};
use crate::store::Store;

/// Counts the objects under the store's prefix by the key their frame
/// names (a read of each object's first bytes), and, with per-run data
/// keys, the data keys by the key-encryption key version that wraps them.
pub(crate) async fn keys(store: &Store, json: bool) -> anyhow::Result<ExitCode> {
    let usage = KeyUsage::scan(store.objects.as_ref(), &store.base)
        .await
        .with_context(|| format!("cannot scan the objects of {}", store.url))?;
    let wrapped = match store.memo.seal().data_keys() {
        Some(keys) => Some(
            keys.kek_versions()
                .await
                .context("cannot read the data keys of the key store")?,
        ),
        None => None,
    };
    if json {
        print_json(&json!({
            "objects": usage.objects,
            "by_key_version": usage.by_key_version,
            "data_key_sealed": usage.data_key_sealed,
            "plaintext": usage.plaintext,
            "never_sealed": usage.never_sealed,
            "unframed": usage.unframed,
            "unknown_frames": usage.unknown,
            "data_keys_by_kek_version": wrapped,
        }));
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{} object(s) under {}", usage.objects, store.url);
    for (version, count) in &usage.by_key_version {
        outln!("  {count} encrypted with key version {version} of the store keyring");
    }
    if usage.data_key_sealed > 0 {
        outln!(
            "  {} encrypted with per-run data keys",
            usage.data_key_sealed
        );
    }
    if usage.plaintext > 0 {
        outln!(
            "  {} value(s) not encrypted (stored before encryption was on: keep \
             accept_plaintext until there are none)",
            usage.plaintext
        );
    }
    if usage.never_sealed > 0 {
        outln!(
            "  {} never encrypted (terminal markers, due-run entries, status hints: their \
             meaning is in their names)",
            usage.never_sealed
        );
    }
    if usage.unknown > 0 {
        outln!(
            "  {} in a frame this memoctl does not know (a newer release's): they may need any key",
            usage.unknown
        );
    }
    if usage.unframed > 0 {
        outln!(
            "  {} with no frame (vacated run pointers, files memo did not write)",
            usage.unframed
        );
    }
    if let Some(wrapped) = wrapped {
        let total: u64 = wrapped.values().sum();
        outln!("{total} data key(s) in the key store");
        for (version, count) in &wrapped {
            outln!("  {count} wrapped by key-encryption key version {version}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
