//! No memo type that holds a store prints the store's credentials in its
//! `Debug` output: `object_store`'s Azure client prints an access key's bytes
//! and a SAS token's signature in its own `Debug`, so every memo type names
//! a store by its `Display` (backend, account, container) instead. Checked
//! with real Azure clients, one built with an access key and one with a SAS
//! token (no request is made).

use std::sync::Arc;
use std::time::Duration;

use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::azure::MicrosoftAzureBuilder;
use memo_runtime::testing::{
    CaseFoldingStore, CountingStore, FaultInjectingStore, IgnoresConditionalCreates,
};
use memo_runtime::workflow::Runtime;
use memo_runtime::{
    MemoStore,
    retention::RetentionSweeper,
    runtime_store::{ObjectStoreRuntimeStore, RuntimeStore},
    store::{StoreAndPrefix, store_from_url},
};
use memo_tests::fixtures::run;

/// The access key's bytes: what the Azure client's `Debug` prints.
const KEY_BYTES: &[u8] = b"memo-test-access-key-SUPERSECRET";
const SAS_SIGNATURE: &str = "SASSIGNATURESUPERSECRET";

/// The access key as Azure hands it out: `KEY_BYTES` in standard base64.
fn access_key() -> String {
    "bWVtby10ZXN0LWFjY2Vzcy1rZXktU1VQRVJTRUNSRVQ=".to_string()
}

/// The secrets as any `Debug` form could show them.
fn leaks(shown: &str) -> Vec<&'static str> {
    let compact: String = shown.chars().filter(|c| !c.is_whitespace()).collect();
    let key_bytes = KEY_BYTES[..12]
        .iter()
        .map(u8::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut found = Vec::new();
    if compact.contains(&access_key()) {
        found.push("the access key");
    }
    if compact.contains(&key_bytes) {
        found.push("the access key's bytes");
    }
    if compact.contains(SAS_SIGNATURE) {
        found.push("the SAS signature");
    }
    found
}

/// The Azure clients `store_from_url` opens with an access key and with a
/// SAS token, each wrapped in its conditional-create check and bare.
fn azure_stores() -> Vec<(&'static str, StoreAndPrefix)> {
    let common = [
        ("account_name", "devstoreaccount1".to_string()),
        (
            "endpoint",
            "http://127.0.0.1:1/devstoreaccount1".to_string(),
        ),
        ("max_retries", "0".to_string()),
    ];
    let key = ("access_key", access_key());
    let sas = (
        "sas_token",
        format!("sv=2024-01-01&ss=b&sig={SAS_SIGNATURE}"),
    );
    let bare = ("check_conditional_create", "false".to_string());
    let open = |options: Vec<(&str, String)>| {
        store_from_url("az://container/memo", [&common[..], &options].concat()).unwrap()
    };
    vec![
        ("access key", open(vec![key.clone()])),
        ("SAS token", open(vec![sas.clone()])),
        ("access key (bare)", open(vec![key, bare.clone()])),
        ("SAS token (bare)", open(vec![sas, bare])),
    ]
}

/// Both `Debug` forms of `value`.
fn both_forms(value: &dyn std::fmt::Debug) -> [String; 2] {
    [format!("{value:?}"), format!("{value:#?}")]
}

fn assert_no_secret(credential: &str, what: &str, value: &dyn std::fmt::Debug) {
    for shown in both_forms(value) {
        assert_eq!(
            leaks(&shown),
            Vec::<&str>::new(),
            "{what} over an Azure store with a {credential}:\n{shown}"
        );
    }
}

#[test]
fn the_azure_client_itself_prints_its_credentials() {
    // What makes the checks below worth having.
    for (credential, opened) in azure_stores() {
        if credential.ends_with("(bare)") {
            let raw = format!("{:?}", opened.store);
            assert!(!leaks(&raw).is_empty(), "{credential}: {raw}");
        }
    }
    let sas = MicrosoftAzureBuilder::new()
        .with_account("devstoreaccount1")
        .with_container_name("container")
        .with_sas_authorization(vec![("sig".to_string(), SAS_SIGNATURE.to_string())])
        .build()
        .unwrap();
    assert!(!leaks(&format!("{sas:?}")).is_empty());
}

#[test]
fn a_store_and_prefix_prints_no_credentials() {
    for (credential, opened) in azure_stores() {
        assert_no_secret(credential, "StoreAndPrefix", &opened);
        assert!(format!("{opened:?}").contains("container"), "{opened:?}");
    }
}

#[test]
fn an_object_store_runtime_store_prints_no_credentials() {
    for (credential, opened) in azure_stores() {
        let records = ObjectStoreRuntimeStore::new(opened.store.clone(), "runs");
        assert_no_secret(credential, "ObjectStoreRuntimeStore", &records);
        let shared: Arc<dyn RuntimeStore> = Arc::new(records);
        assert_no_secret(credential, "dyn RuntimeStore", &shared);
    }
}

#[test]
fn memo_stores_and_memos_print_no_credentials() {
    for (credential, opened) in azure_stores() {
        let memo = MemoStore::new(opened.store.clone(), "memo");
        assert_no_secret(credential, "MemoStore", &memo);
        assert_no_secret(credential, "Memo", &memo.new_memo(&run("r"), 0));
    }
}

#[test]
fn sweepers_and_their_builders_print_no_credentials() {
    for (credential, opened) in azure_stores() {
        let memo = MemoStore::new(opened.store.clone(), "memo");
        let records = Arc::new(ObjectStoreRuntimeStore::new(opened.store.clone(), "runs"));
        let builder = RetentionSweeper::builder(memo, Duration::from_secs(60))
            .runtime_store(records as Arc<dyn RuntimeStore>);
        assert_no_secret(credential, "RetentionSweeperBuilder", &builder);
        assert_no_secret(credential, "RetentionSweeper", &builder.build());
    }
}

#[test]
fn runtimes_and_their_builders_print_no_credentials() {
    for (credential, opened) in azure_stores() {
        let builder = Runtime::builder()
            .memo_store(MemoStore::new(opened.store.clone(), "memo"))
            .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
                opened.store.clone(),
                "runs",
            )));
        assert_no_secret(credential, "RuntimeBuilder", &builder);
        let runtime = builder.build().unwrap();
        assert_no_secret(credential, "Runtime", &runtime);
        assert_no_secret(credential, "RetentionSweeper", &runtime.retention_sweeper());
    }
}

#[test]
fn the_testing_wrappers_print_no_credentials() {
    for (credential, opened) in azure_stores() {
        let inner: Arc<dyn ObjectStore> = opened.store;
        assert_no_secret(
            credential,
            "FaultInjectingStore",
            &FaultInjectingStore::new(inner.clone()),
        );
        assert_no_secret(
            credential,
            "CountingStore",
            &CountingStore::new(inner.clone()),
        );
        assert_no_secret(
            credential,
            "CaseFoldingStore",
            &CaseFoldingStore::new(inner.clone()),
        );
        assert_no_secret(
            credential,
            "IgnoresConditionalCreates",
            &IgnoresConditionalCreates::new(inner),
        );
    }
}
