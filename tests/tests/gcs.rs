//! memo against a GCS API: the server named by `MEMO_GCS_ENDPOINT` and the
//! bucket `MEMO_GCS_BUCKET`, reached without OAuth (the endpoint goes in a
//! service-account key with `disable_oauth`, as `object_store`'s own CI
//! does). Without `MEMO_GCS_ENDPOINT` every check says it was skipped and
//! passes. Point it at a real bucket (through a proxy that adds a token,
//! or an emulator) to run the same checks against Google.
//!
//! In CI the server is **not Google**: it is `.ci/fake_gcs_xml.py`, a fake
//! of GCS's XML API written for memo from Google's XML API reference, for
//! exactly the requests `object_store`'s GCS client makes (simple and
//! multipart uploads, `x-goog-if-generation-match` preconditions with 412
//! on a mismatch, reads with ranges and conditions, deletes, copies,
//! `list-type=2` listings). `object_store`'s GCS client writes through the
//! XML API, creates conditional on `x-goog-if-generation-match: 0`, and no
//! emulator installable from a package registry honours that on an XML
//! upload (fake-gcs-server 1.54.0 answers such a PUT with 400 "invalid
//! uploadType" and ignores the generation where it accepts one;
//! gcp-storage-emulator 2026.7.19 ignores the header and has no XML
//! listing, HEAD, DELETE or multipart upload; gcplocal 0.1.0, drongo 0.8.0
//! and cloudbox 0.2.3 speak the JSON API only). So these checks pass
//! against memo's reading of Google's documentation: a difference between
//! Google's server and its documentation would not show here. The fake's
//! docstring says what it implements and what it cannot tell.

use memo_tests::cloud::Cloud;

memo_tests::cloud_checks!(Cloud::Gcs);
