//! Opening a stored frame in a test, data-key frames included: whose key
//! seals an object is learnt from where it lies in the store's layout.

use bytes::Bytes;
use object_store::path::Path;

use crate::envelope;
use crate::error::{Error, Result};
use crate::layout::{Layout, MEMOS, STEP_OUTPUTS, parse_run_segment};
use crate::run_id::RunId;
use crate::seal::Seal;

/// See [`open_frame_with_keys`](super::open_frame_with_keys).
pub(super) async fn open_with_keys(
    prefix: &str,
    path: &Path,
    framed: Bytes,
    seal: &Seal,
) -> Result<Bytes> {
    let Some(key) = envelope::data_key_ref(&framed) else {
        return envelope::open(path, framed, seal, u64::MAX);
    };
    let scoped = match owner(&Layout::new(prefix), path) {
        Some(Owner::Run(run_id)) => seal.for_run_id(&run_id),
        Some(Owner::Shared(namespace)) => seal.for_shared(&namespace),
        None => {
            return Err(Error::corrupt(
                path,
                format!(
                    "the object is sealed with a data key but lies in no run or shared \
                     namespace of the store under {prefix:?}"
                ),
            ));
        }
    };
    let keyed = scoped.for_reading(path, Some(key)).await?;
    envelope::open(path, framed, &keyed, u64::MAX)
}

/// Whose data key seals the objects at a path.
#[derive(Debug, PartialEq)]
enum Owner {
    Run(RunId),
    Shared(String),
}

/// The run or shared namespace `path` belongs to in `layout`: checked by
/// building the folder back from what was parsed, so a path outside the
/// layout (or a prefix that merely looks like one) names no one.
fn owner(layout: &Layout, path: &Path) -> Option<Owner> {
    let rest: Vec<String> = path
        .prefix_match(layout.prefix())?
        .map(|part| part.as_ref().to_owned())
        .collect();
    match rest.as_slice() {
        [folder, entries, namespace, _, ..] if folder == "shared" && entries == "entries" => {
            let folder = layout.shared_entries(namespace);
            path.prefix_matches(&folder)
                .then(|| Owner::Shared(namespace.clone()))
        }
        [_, run, _, ..] => {
            let run_id = parse_run_segment(run)?;
            let folders = [
                layout.run_folder(MEMOS, &run_id),
                layout.run_folder(STEP_OUTPUTS, &run_id),
                layout.runs_folder(&run_id),
            ];
            folders
                .iter()
                .any(|folder| path.prefix_matches(folder))
                .then_some(Owner::Run(run_id))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_id::Incarnation;

    #[test]
    fn the_owner_of_a_path_is_read_from_the_layout_under_the_prefix() {
        let layout = Layout::new("a/runs");
        let run = RunId::new("Order-1").unwrap();
        let inc = Incarnation::from_u64(7);
        let memo_entry = layout.entry(MEMOS, &run, inc, 3, "ab");
        let pointer = layout.run_pointer(&run);
        let log = layout.log_entry(&run, inc, 5);
        let shared = layout.shared_entries("ns").join("digest");
        assert_eq!(owner(&layout, &memo_entry), Some(Owner::Run(run.clone())));
        assert_eq!(owner(&layout, &pointer), Some(Owner::Run(run.clone())));
        assert_eq!(owner(&layout, &log), Some(Owner::Run(run)));
        assert_eq!(owner(&layout, &shared), Some(Owner::Shared("ns".into())));
        // Outside the prefix, or in no run's folder.
        assert_eq!(owner(&Layout::new("b"), &memo_entry), None);
        assert_eq!(
            owner(
                &layout,
                &layout.markers_folder(crate::layout::TERMINALS).join("x")
            ),
            None
        );
    }
}
