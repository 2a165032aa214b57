//! memo against a real Azure Blob API: the account URL named by
//! `MEMO_AZURE_ENDPOINT` (in CI, Azurite on 127.0.0.1, started by `.ci/run`:
//! `http://127.0.0.1:PORT/devstoreaccount1`) and the container
//! `MEMO_AZURE_CONTAINER`, with Azurite's well-known account and key unless
//! `AZURE_STORAGE_ACCOUNT_NAME` and `AZURE_STORAGE_ACCOUNT_KEY` say
//! otherwise. Without `MEMO_AZURE_ENDPOINT` every test says it was skipped
//! and passes.
//!
//! The checks are those every cloud passes, in `memo_tests::cloud::checks`.

use memo_tests::cloud::Cloud;

memo_tests::cloud_checks!(Cloud::Azure);
