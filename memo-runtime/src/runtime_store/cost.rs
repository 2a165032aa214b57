//! The cost ledger: what each attempt of a run cost, in requests, bytes,
//! memo entries and memoized calls, kept with the run.
//!
//! # Why one entry per attempt, kept with the run
//!
//! The ledger stays out of the run's steps: a step's commit writes nothing
//! more and a fresh load reads nothing more. The workflow runtime counts
//! an attempt's requests as they are made (a task-local meter and a
//! counting wrapper around the stores' object store) and records them
//! once. The attempt that ends the run hands its entry to the commit that
//! ends it ([`Commit::cost`]): the run keeps it with its end, at no request
//! of its own (a record apart cost a `PUT` and a read of the run's pointer,
//! two of a short run's requests). An attempt that suspends or stops writes
//! its entry as one small object of its own
//! ([`RuntimeStore::record_attempt_cost`]) before it releases its lease.
//! One entry per attempt rather than one per run that each attempt
//! updates: entries are written once (a conditional create, or the
//! run's one terminal commit), so a retried attempt adds its own and never
//! counts another's twice, and two workers never race on one object. Both
//! live with the run incarnation, so whatever deletes the run (a retention
//! sweep, `memoctl`) deletes them with it; a run from before the ledger has
//! none, and reads as having no ledger.
//!
//! # What an attempt's entry counts
//!
//! Every request the attempt's task makes to the memo store and the runtime
//! store, from the start of [`Runtime::run`](crate::workflow::Runtime::run)
//! (the run's creation included) or of the attempt (for a run resumed or
//! recovered) up to the commit that carries the entry, or the record's own
//! write: the attempt's lease, the history it reads, its steps' commits,
//! its memoized calls' reads and writes, and lease renewals. Not counted:
//! the commit that ends the run (about 5 requests on object storage: its
//! status hint, its log entry, the checkpoint of the run's end, the
//! pointer read, the replaced hint's deletion) or the record's own write
//! and the pointer read after it; what follows them (the terminal marker,
//! the lease's release and the due entry's removal); requests made by tasks
//! a step spawns; and anything done outside an attempt (signals, operators'
//! reads, sweeps).
//!
//! A memoized call can declare what one run of its body costs
//! (`#[memoized(cost = 0.002)]`, in dollars): the record sums the declared
//! cost of the calls whose body ran (paid) and of those answered by a
//! committed value instead (saved).

use serde::{Deserialize, Serialize};

use crate::meter::Reading;

#[cfg(doc)]
use super::{Commit, RuntimeStore};

/// What one attempt of a run cost: its entry in the run's cost ledger.
///
/// Read a run's ledger with [`RuntimeStore::load_attempt_costs`]; `memoctl
/// show RUN` prints it, `memoctl runs --sort cost` orders runs by it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AttemptCost {
    /// The attempt's number (the first attempt is 1).
    pub attempt: u32,
    /// When the attempt recorded it, in milliseconds since the Unix epoch.
    pub recorded_at_ms: u64,
    /// What it used.
    pub usage: Usage,
}

/// Requests, bytes, memo entries and memoized calls: what an attempt used,
/// or (summed with [`Usage::add`]) a run.
///
/// Requests are counted by the price tier of object storage (S3's and
/// GCS's list prices bill `PUT`, `COPY`, `POST` and `LIST` at one rate,
/// `GET` and `HEAD` at a lower one, and `DELETE` not at all), each once when
/// it is made, whether it succeeds or not. A listing counts once per call
/// (a bucket answers at most 1,000 names per listing request: memo lists a
/// run's own folders, which hold fewer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Usage {
    /// `GET` and `HEAD` requests.
    pub gets: u64,
    /// `PUT` requests (conditional creates included), copies, renames and
    /// multipart uploads.
    pub puts: u64,
    /// Listing requests.
    pub lists: u64,
    /// Objects deleted.
    pub deletes: u64,
    /// Bytes uploaded (the framed objects of every `PUT`).
    pub bytes_written: u64,
    /// Memo entries created (not counting a write that found the entry
    /// committed by another attempt).
    pub entries_written: u64,
    /// The payload bytes of those entries.
    pub entry_bytes: u64,
    /// Memoized calls whose body ran and returned a value.
    pub calls_run: u64,
    /// Memoized calls answered by a committed value: their body did not
    /// run again.
    pub calls_reused: u64,
    /// The declared cost of the calls run (`#[memoized(cost = ..)]`), in
    /// billionths of a dollar ([`paid_dollars`](Self::paid_dollars)).
    pub paid_nanodollars: u64,
    /// The declared cost of the calls reused: what memo saved.
    pub saved_nanodollars: u64,
}

impl Usage {
    /// Every request, of every kind.
    pub fn requests(&self) -> u64 {
        self.gets + self.puts + self.lists + self.deletes
    }

    /// The declared cost of the memoized calls whose body ran, in dollars.
    pub fn paid_dollars(&self) -> f64 {
        self.paid_nanodollars as f64 / 1e9
    }

    /// The declared cost of the memoized calls answered without running
    /// their body, in dollars.
    pub fn saved_dollars(&self) -> f64 {
        self.saved_nanodollars as f64 / 1e9
    }

    /// Adds `other` to these counts (saturating).
    pub fn add(&mut self, other: &Usage) {
        let Usage {
            gets,
            puts,
            lists,
            deletes,
            bytes_written,
            entries_written,
            entry_bytes,
            calls_run,
            calls_reused,
            paid_nanodollars,
            saved_nanodollars,
        } = *other;
        self.gets = self.gets.saturating_add(gets);
        self.puts = self.puts.saturating_add(puts);
        self.lists = self.lists.saturating_add(lists);
        self.deletes = self.deletes.saturating_add(deletes);
        self.bytes_written = self.bytes_written.saturating_add(bytes_written);
        self.entries_written = self.entries_written.saturating_add(entries_written);
        self.entry_bytes = self.entry_bytes.saturating_add(entry_bytes);
        self.calls_run = self.calls_run.saturating_add(calls_run);
        self.calls_reused = self.calls_reused.saturating_add(calls_reused);
        self.paid_nanodollars = self.paid_nanodollars.saturating_add(paid_nanodollars);
        self.saved_nanodollars = self.saved_nanodollars.saturating_add(saved_nanodollars);
    }

    /// The sum of what `attempts` used: a run's total.
    pub fn total<'a>(attempts: impl IntoIterator<Item = &'a AttemptCost>) -> Usage {
        let mut total = Usage::default();
        for attempt in attempts {
            total.add(&attempt.usage);
        }
        total
    }
}

impl AttemptCost {
    /// A run's ledger from what its attempts recorded apart and the entry
    /// its terminal commit carried (`ending`): one entry per attempt, in
    /// attempt order; `ending` stands for its attempt if that attempt also
    /// recorded one apart (no release writes both).
    pub(crate) fn ledger(
        mut recorded: Vec<AttemptCost>,
        ending: Option<&AttemptCost>,
    ) -> Vec<AttemptCost> {
        if let Some(ending) = ending {
            recorded.retain(|cost| cost.attempt != ending.attempt);
            recorded.push(ending.clone());
        }
        recorded.sort_by_key(|cost| cost.attempt);
        recorded
    }

    /// What attempt `attempt` used, as its meter read at `recorded_at_ms`.
    pub(crate) fn of_reading(attempt: u32, recorded_at_ms: u64, reading: Reading) -> AttemptCost {
        let Reading {
            gets,
            puts,
            lists,
            deletes,
            bytes_written,
            entries_written,
            entry_bytes,
            calls_run,
            calls_reused,
            paid_nanodollars,
            saved_nanodollars,
        } = reading;
        AttemptCost {
            attempt,
            recorded_at_ms,
            usage: Usage {
                gets,
                puts,
                lists,
                deletes,
                bytes_written,
                entries_written,
                entry_bytes,
                calls_run,
                calls_reused,
                paid_nanodollars,
                saved_nanodollars,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// `{attempt: 2, recorded_at_ms: 7, usage: {gets: 1, puts: 2, lists: 3,
    /// deletes: 4, bytes_written: 5, entries_written: 6, entry_bytes: 7,
    /// calls_run: 8, calls_reused: 9, paid_nanodollars: 10,
    /// saved_nanodollars: 11}}`, MessagePack with named fields.
    const RECORD: &str = "83a7617474656d707402ae7265636f726465645f61745f6d7307a57573616765\
        8ba46765747301a47075747302a56c6973747303a764656c6574657304ad6279\
        7465735f7772697474656e05af656e74726965735f7772697474656e06ab656e\
        7472795f627974657307a963616c6c735f72756e08ac63616c6c735f72657573\
        656409b0706169645f6e616e6f646f6c6c6172730ab173617665645f6e616e6f\
        646f6c6c6172730b";

    fn record() -> AttemptCost {
        AttemptCost {
            attempt: 2,
            recorded_at_ms: 7,
            usage: Usage {
                gets: 1,
                puts: 2,
                lists: 3,
                deletes: 4,
                bytes_written: 5,
                entries_written: 6,
                entry_bytes: 7,
                calls_run: 8,
                calls_reused: 9,
                paid_nanodollars: 10,
                saved_nanodollars: 11,
            },
        }
    }

    #[test]
    fn the_attempt_cost_record_is_pinned() {
        let bytes = codec::encode(&record()).unwrap();
        assert_eq!(hex(&bytes), RECORD, "the stored attempt cost changed");
        assert_eq!(codec::decode::<AttemptCost>(&bytes).unwrap(), record());
    }

    #[test]
    fn usage_missing_a_field_reads_it_as_zero() {
        // A record of a later version may add fields, one of an earlier
        // may lack some: `usage: {gets: 1}`.
        #[derive(Serialize)]
        struct Partial {
            attempt: u32,
            recorded_at_ms: u64,
            usage: PartialUsage,
        }
        #[derive(Serialize)]
        struct PartialUsage {
            gets: u64,
        }
        let partial = Partial {
            attempt: 1,
            recorded_at_ms: 0,
            usage: PartialUsage { gets: 1 },
        };
        let bytes = codec::encode(&partial).unwrap();
        let read: AttemptCost = codec::decode(&bytes).unwrap();
        assert_eq!(read.usage.gets, 1);
        assert_eq!(read.usage.requests(), 1);
    }

    #[test]
    fn a_ledger_has_one_entry_per_attempt_in_order_and_the_ending_one_stands() {
        let of = |attempt: u32, gets: u64| AttemptCost {
            attempt,
            recorded_at_ms: 0,
            usage: Usage {
                gets,
                ..Usage::default()
            },
        };
        // Listed in no order, with the ending attempt's record too (its end
        // applied, the answer lost, and the record written as for an
        // attempt that stopped): the end's entry stands for it.
        let recorded = vec![of(3, 30), of(1, 10), of(2, 20)];
        let ledger = AttemptCost::ledger(recorded.clone(), Some(&of(3, 33)));
        assert_eq!(ledger, [of(1, 10), of(2, 20), of(3, 33)]);
        let ledger = AttemptCost::ledger(recorded, None);
        assert_eq!(ledger, [of(1, 10), of(2, 20), of(3, 30)]);
        assert_eq!(AttemptCost::ledger(Vec::new(), Some(&of(1, 1))), [of(1, 1)]);
    }

    #[test]
    fn a_runs_total_sums_its_attempts() {
        let one = record();
        let total = Usage::total([&one, &one]);
        assert_eq!(total.requests(), 2 * (1 + 2 + 3 + 4));
        assert_eq!(total.saved_nanodollars, 22);
        assert!((Usage::total([&one]).paid_dollars() - 1e-8).abs() < 1e-15);
    }
}
