//! Foreign objects planted in the shared store, and their removal.

use futures::FutureExt;
use object_store::ObjectStoreExt;
use object_store::path::Path;
use rand::RngExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::testing::sim::Ledger;
use crate::testing::sim::compat;
use crate::testing::sim::plant::{self, Kind};
use crate::workflow::{Workflow, WorkflowFn};

use super::{MAX_PLANTS, PLANT_POLLS, PLANT_RATE, World};

impl<'w, I, O, Mk, F> World<'w, I, O, Mk, F>
where
    I: Serialize + DeserializeOwned + Clone + 'w,
    O: Serialize + DeserializeOwned + 'w,
    Mk: Fn(Ledger) -> Workflow<F>,
    F: WorkflowFn<I, Output = O> + 'w,
{
    /// Removes the foreign objects whose time is up, and plants another
    /// now and then.
    pub(super) fn tend_plants(&mut self) {
        let polls = self.polls;
        let (due, standing) = std::mem::take(&mut self.plants)
            .into_iter()
            .partition(|&(_, until)| until <= polls);
        self.plants = standing;
        for (path, _) in due {
            self.unplant(&path);
        }
        if self.plants.len() < MAX_PLANTS && self.rng.random_bool(PLANT_RATE) {
            self.plant_random();
        }
    }

    /// Another writer of the shared store plants a foreign object in place
    /// of one memo wrote, taken from a listing: a huge one anywhere, a
    /// nested value in a memo or log entry, a forged checkpoint.
    pub(super) fn plant_random(&mut self) {
        let Some(foreign) = self.foreign.clone() else {
            return;
        };
        let listed: Vec<Path> = compat::objects_of_runs(self.checker.objects())
            .into_iter()
            .filter(|path| !self.plants.iter().any(|(p, _)| p == path))
            .collect();
        if listed.is_empty() {
            return;
        }
        // The kind first, so that the rarer objects it fits (checkpoints)
        // get their share; a huge object fits anywhere.
        let mut kind = [Kind::Huge, Kind::Nested, Kind::Forged][self.rng.random_range(0..3)];
        let fits: Vec<&Path> = listed
            .iter()
            .filter(|path| plant::kinds_for(path).contains(&kind))
            .collect();
        let path = if fits.is_empty() {
            kind = Kind::Huge;
            listed[self.rng.random_range(0..listed.len())].clone()
        } else {
            fits[self.rng.random_range(0..fits.len())].clone()
        };
        let original = self
            .checker
            .objects()
            .get(&path)
            .now_or_never()
            .and_then(Result::ok)
            .and_then(|got| got.bytes().now_or_never())
            .and_then(Result::ok);
        let bytes = match (kind, original) {
            (Kind::Forged, Some(original)) => plant::forged(&path, original),
            (Kind::Nested, original) => Some(plant::nested(&path, original)),
            _ => None,
        };
        match bytes {
            Some(bytes) => foreign.plant_bytes(path.clone(), bytes),
            None => {
                kind = Kind::Huge;
                foreign.plant_huge(path.clone());
            }
        }
        let polls = self.rng.random_range(1..PLANT_POLLS);
        self.checker.set_planted(path.as_ref(), true);
        self.checker.event(format!(
            "a foreign object ({kind:?}) is planted at {path} for {polls} polls"
        ));
        self.plants.push((path, self.polls + polls));
    }

    /// Forgets the foreign objects removed before every task still running
    /// started: an error naming one of them now is a corrupt read.
    pub(super) fn forget_removed_plants(&mut self) {
        let oldest = self.tasks.iter().map(|t| t.id).min().unwrap_or(u64::MAX);
        let checker = &self.checker;
        self.removed_plants.retain(|(path, next_task)| {
            let read_it = oldest < *next_task;
            if !read_it && !self.plants.iter().any(|(p, _)| p == path) {
                checker.set_planted(path.as_ref(), false);
            }
            read_it
        });
    }

    /// Removes the foreign object at `path`: reads see what memo wrote
    /// there again.
    pub(super) fn unplant(&mut self, path: &Path) {
        if let Some(foreign) = &self.foreign {
            foreign.remove(path);
        }
        // A task that read it may report what it read after the removal.
        self.removed_plants.push((path.clone(), self.next_task));
        self.checker
            .event(format!("the foreign object at {path} is removed"));
    }
}
