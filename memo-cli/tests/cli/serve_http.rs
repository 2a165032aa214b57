//! `memoctl serve` over plain HTTP on 127.0.0.1: each page's status and
//! content, escaping, paging, and the safety rules (CSRF, Origin, Host,
//! token, read-only) refusing what they must.

use crate::inspector;
use crate::support;

use std::sync::Arc;

use inspector::{Folder, Inspector, SCRIPT_INPUT, SCRIPT_RUN};
use memo_runtime::runtime_store::{NewRun, RunStatus, RuntimeStore};
use memo_runtime::{runtime_store::ObjectStoreRuntimeStore, store::store_from_url};
use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap};

/// A client that follows no redirect (the tests look at them).
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .unwrap()
}

async fn get(url: &str) -> (StatusCode, HeaderMap, String) {
    let response = client().get(url).send().await.expect("an answer");
    let status = response.status();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

async fn post(url: &str, form: &[(&str, &str)], headers: &[(&str, &str)]) -> (StatusCode, String) {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let mut request = client()
        .post(url)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("an answer");
    let status = response.status();
    (status, response.text().await.unwrap())
}

/// The CSRF token in a page's form.
fn csrf(page: &str) -> String {
    let at = page
        .find(r#"name="csrf" value=""#)
        .unwrap_or_else(|| panic!("no CSRF field in {page}"));
    let rest = &page[at + r#"name="csrf" value=""#.len()..];
    rest[..rest.find('"').unwrap()].to_string()
}

/// The signals recorded for run `run` in `folder`.
async fn signals(folder: &Folder, run: &str) -> usize {
    let opened = store_from_url(&folder.url, Vec::<(String, String)>::new()).unwrap();
    let runs = ObjectStoreRuntimeStore::new(opened.store, "runtime");
    runs.load_inputs(&support::run(run)).await.unwrap().len()
}

#[tokio::test(flavor = "multi_thread")]
async fn pages_answer_with_their_status_and_show_runs_steps_and_markers() {
    let folder = Folder::filled().await;
    let inspector = Inspector::start(&folder.url, &[]);
    let base = &inspector.base;

    let (status, headers, runs) = get(&format!("{base}/runs")).await;
    assert_eq!(status, StatusCode::OK, "{runs}");
    assert!(
        headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("default-src 'none'"),
        "{headers:?}"
    );
    for run in ["order-1", "bad-2", "Ticket-42", "old-1", SCRIPT_RUN] {
        assert!(
            runs.contains(&format!(r#"href="/runs/{run}""#)),
            "{run}: {runs}"
        );
    }

    let (status, _, order) = get(&format!("{base}/runs/order-1")).await;
    assert_eq!(status, StatusCode::OK, "{order}");
    // The steps, their outputs decoded from MessagePack, their memo entries.
    for shown in [
        "reserve",
        "charge",
        "reserved order-1",
        "1999",
        "<td>memo</td>",
    ] {
        assert!(order.contains(shown), "{shown}: {order}");
    }
    let (_, _, failed) = get(&format!("{base}/runs/bad-2")).await;
    assert!(failed.contains("card declined for bad-2"), "{failed}");
    let (_, _, waiting) = get(&format!("{base}/runs/Ticket-42")).await;
    assert!(waiting.contains("Waits for the signal"), "{waiting}");
    // Its draft step took two tries; the page says so, and why.
    assert!(waiting.contains("2 tries"), "{waiting}");
    assert!(waiting.contains(support::BUSY), "{waiting}");
    assert!(!order.contains(" tries<"), "one try each: {order}");
    assert!(
        waiting.contains("/runs/Ticket-42/signal?name=approval&amp;payload=true"),
        "an approve button: {waiting}"
    );

    let (status, _, retention) = get(&format!("{base}/retention")).await;
    assert_eq!(status, StatusCode::OK, "{retention}");
    assert!(retention.contains(r#"href="/runs/old-1""#), "{retention}");
    assert!(
        !retention.contains(r#"href="/runs/order-1""#),
        "not expired: {retention}"
    );
    let (_, _, counted) = get(&format!("{base}/retention?count=1")).await;
    assert!(counted.contains("Runs to clear"), "{counted}");

    for (path, expected) in [
        ("/runs/no-such-run", StatusCode::NOT_FOUND),
        ("/runs/not%20an%20id", StatusCode::BAD_REQUEST),
        ("/runs?status=Sleeping", StatusCode::BAD_REQUEST),
        ("/nothing-here", StatusCode::NOT_FOUND),
        ("/runs/order-1/cancel", StatusCode::CONFLICT),
    ] {
        let (status, _, body) = get(&format!("{base}{path}")).await;
        assert_eq!(status, expected, "{path}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_script_in_a_run_input_is_shown_as_text() {
    let folder = Folder::filled().await;
    let inspector = Inspector::start(&folder.url, &[]);
    let (status, _, page) = get(&format!("{}/runs/{SCRIPT_RUN}", inspector.base)).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(!page.contains("<script"), "{page}");
    assert!(!page.contains(r#"<b id="injected">"#), "{page}");
    assert!(
        page.contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;"),
        "the input is shown, as text: {page}"
    );
    let _ = SCRIPT_INPUT;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signal_needs_this_inspectors_csrf_token_and_origin() {
    let folder = Folder::filled().await;
    let inspector = Inspector::start(&folder.url, &[]);
    let base = &inspector.base;
    let action = format!("{base}/runs/Ticket-42/signal");
    let signal =
        |csrf: &'static str| vec![("name", "approval"), ("payload", "true"), ("csrf", csrf)];

    for (form, headers) in [
        (signal(""), vec![]),
        (signal("0123456789abcdef"), vec![]),
        (vec![("name", "approval"), ("payload", "true")], vec![]),
    ] {
        let (status, body) = post(&action, &form, &headers).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(body.contains("CSRF"), "{body}");
    }
    let (_, _, confirm) = get(&format!("{action}?name=approval&payload=true")).await;
    let token = csrf(&confirm);
    let good = [
        ("name", "approval"),
        ("payload", "true"),
        ("csrf", token.as_str()),
    ];
    for headers in [
        vec![("origin", "http://evil.example")],
        vec![("sec-fetch-site", "cross-site")],
    ] {
        let (status, body) = post(&action, &good, &headers).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{headers:?}: {body}");
    }
    assert_eq!(
        signals(&folder, "Ticket-42").await,
        0,
        "nothing refused was sent"
    );

    let origin = base.clone();
    let (status, body) = post(&action, &good, &[("origin", origin.as_str())]).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    assert_eq!(signals(&folder, "Ticket-42").await, 1);
    assert_eq!(
        folder.resume_ticket(1).await.as_deref(),
        Some("sent Re: refund"),
        "the approved run continues"
    );
    let (_, _, done) = get(&format!("{base}/runs/Ticket-42")).await;
    assert!(done.contains("sent Re: refund"), "{done}");
    // An ended run takes no more signals.
    let (status, body) = post(&action, &good, &[]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_and_sweep_act_through_their_confirmation_forms() {
    let folder = Folder::filled().await;
    let inspector = Inspector::start(&folder.url, &[]);
    let base = &inspector.base;
    let (_, _, confirm) = get(&format!("{base}/runs/Ticket-42/cancel")).await;
    let token = csrf(&confirm);
    let (status, body) = post(
        &format!("{base}/runs/Ticket-42/cancel"),
        &[("reason", "no longer needed"), ("csrf", &token)],
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    let (_, _, cancelled) = get(&format!("{base}/runs/Ticket-42")).await;
    assert!(cancelled.contains("Cancelled"), "{cancelled}");
    assert!(cancelled.contains("no longer needed"), "{cancelled}");

    let (status, confirm) = {
        let (status, _, body) = get(&format!("{base}/retention/sweep")).await;
        (status, body)
    };
    assert_eq!(status, StatusCode::OK, "{confirm}");
    assert!(confirm.contains("Runs to clear"), "{confirm}");
    let (status, body) = post(&format!("{base}/retention/sweep"), &[("csrf", &token)], &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("Runs cleared"), "{body}");
    let (status, _, gone) = get(&format!("{base}/runs/old-1")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "old-1 was swept: {gone}");
    let (status, _, _) = get(&format!("{base}/runs/order-1")).await;
    assert_eq!(status, StatusCode::OK, "order-1 is kept");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_addressed_to_another_host_is_refused() {
    let folder = Folder::filled().await;
    let inspector = Inspector::start(&folder.url, &[]);
    // A page whose name was rebound to 127.0.0.1 sends its own name.
    let response = client()
        .get(format!("{}/runs", inspector.base))
        .header(header::HOST, format!("evil.example:{}", inspector.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let body = response.text().await.unwrap();
    assert!(!body.contains("order-1"), "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_a_token_every_request_must_carry_it() {
    let folder = Folder::filled().await;
    let inspector = Inspector::start(&folder.url, &["--token", "s3cret-token"]);
    let base = &inspector.base;
    for path in ["/runs", "/runs/order-1", "/retention", "/?token=wrong"] {
        let (status, _, body) = get(&format!("{base}{path}")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {body}");
        assert!(
            !body.contains("order-1") || path == "/runs/order-1",
            "{body}"
        );
    }
    let (status, headers, _) = get(&format!("{base}/runs?token=s3cret-token")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        headers[header::LOCATION],
        "/runs",
        "the token leaves the address"
    );
    let cookie = headers[header::SET_COOKIE].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let cookie = cookie.split(';').next().unwrap().to_string();
    let with_cookie = client()
        .get(format!("{base}/runs"))
        .header(header::COOKIE, cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(with_cookie.status(), StatusCode::OK);
    let with_bearer = client()
        .get(format!("{base}/runs/order-1"))
        .bearer_auth("s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(with_bearer.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread")]
async fn listening_beyond_loopback_needs_a_token_or_read_only() {
    use std::io::{BufRead as _, BufReader, Read as _};
    use std::process::{Command, Stdio};

    let folder = Folder::empty();
    let mut child = Command::new(env!("CARGO_BIN_EXE_memoctl"))
        .args(["--store", &folder.url, "serve", "--listen", "0.0.0.0:0"])
        .env_remove("MEMOCTL_SERVE_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A server that started prints its address (and would never exit).
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if !line.is_empty() {
        child.kill().ok();
        child.wait().ok();
        panic!(
            "memoctl serve listened beyond loopback with neither a token nor --read-only: {line}"
        );
    }
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(1));
    assert!(
        stderr.contains("--token") && stderr.contains("--read-only"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_inspector_offers_and_takes_no_action() {
    let folder = Folder::filled().await;
    let inspector = Inspector::start(&folder.url, &["--read-only"]);
    let base = &inspector.base;
    let (status, _, page) = get(&format!("{base}/runs/Ticket-42")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Waits for the signal"), "{page}");
    assert!(
        !page.contains("Approve") && !page.contains("/cancel"),
        "{page}"
    );
    for path in [
        "/runs/Ticket-42/signal?name=approval&payload=true",
        "/runs/Ticket-42/cancel",
        "/retention/sweep",
    ] {
        let (status, _, body) = get(&format!("{base}{path}")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
    }
    let (status, body) = post(
        &format!("{base}/runs/Ticket-42/signal"),
        &[("name", "approval"), ("payload", "true"), ("csrf", "x")],
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("read-only"), "{body}");
    assert_eq!(signals(&folder, "Ticket-42").await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_are_paged_and_filtered_by_status_workflow_and_id_prefix() {
    let folder = Folder::empty();
    let opened = store_from_url(&folder.url, Vec::<(String, String)>::new()).unwrap();
    let runs = Arc::new(ObjectStoreRuntimeStore::new(
        Arc::clone(&opened.store),
        "runtime",
    ));
    let ids: Vec<String> = (0..120).map(|i| format!("p-{i:03}")).collect();
    for (i, id) in ids.iter().enumerate() {
        runs.create_run(NewRun {
            run_id: support::run(id),
            workflow: if i % 2 == 0 { "even" } else { "odd" }.into(),
            input: memo_runtime::Bytes::from_static(&[0xc0]),
            created_at_ms: support::now_ms(),
            workflow_version: None,
        })
        .await
        .unwrap();
    }
    let inspector = Inspector::start(&folder.url, &[]);
    let listed = |page: &str| -> Vec<String> {
        page.split(r#"<a class="run" href="/runs/"#)
            .skip(1)
            .map(|rest| rest[..rest.find('"').unwrap()].to_string())
            .collect()
    };
    let next = |page: &str| -> Option<String> {
        let at = page.find(r#"<a class="next" href=""#)?;
        let rest = &page[at + r#"<a class="next" href=""#.len()..];
        Some(rest[..rest.find('"').unwrap()].replace("&amp;", "&"))
    };

    let mut seen = Vec::new();
    let mut url = format!("{}/runs?status=pending", inspector.base);
    let mut pages = 0;
    loop {
        let (status, _, page) = get(&url).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let shown = listed(&page);
        assert!(shown.len() <= 50, "{}", shown.len());
        seen.extend(shown);
        pages += 1;
        match next(&page) {
            Some(path) => url = format!("{}{path}", inspector.base),
            None => break,
        }
        assert!(pages < 10, "paging ends");
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ids, "every run once, in id order");

    let (_, _, page) = get(&format!("{}/runs?prefix=p-10", inspector.base)).await;
    assert_eq!(
        listed(&page),
        (100..110).map(|i| format!("p-{i:03}")).collect::<Vec<_>>()
    );
    let (_, _, page) = get(&format!("{}/runs?workflow=odd&prefix=p-00", inspector.base)).await;
    assert_eq!(listed(&page), ["p-001", "p-003", "p-005", "p-007", "p-009"]);
    let (_, _, page) = get(&format!("{}/runs?status=completed", inspector.base)).await;
    assert!(listed(&page).is_empty(), "{page}");
    let _ = RunStatus::Pending;
}

#[tokio::test(flavor = "multi_thread")]
async fn markers_are_paged_oldest_first_on_the_retention_page() {
    let folder = Folder::empty();
    let opened = store_from_url(&folder.url, Vec::<(String, String)>::new()).unwrap();
    let memo = memo_runtime::MemoStore::new(Arc::clone(&opened.store), "memo");
    // 230 expired markers over three hours, written newest first.
    let hour = memo_runtime::retention::MARKER_PARTITION_MS;
    let ids: Vec<String> = (0..230).map(|i| format!("m-{i:03}")).collect();
    for (i, id) in ids.iter().enumerate().rev() {
        let at = 10 * hour + (i as u64) * (hour / 100);
        memo.markers()
            .write_standalone(&support::run(id), at)
            .await
            .unwrap();
    }
    let inspector = Inspector::start(&folder.url, &[]);
    let listed = |page: &str| -> Vec<String> {
        page.split(r#"<a class="run" href="/runs/"#)
            .skip(1)
            .map(|rest| rest[..rest.find('"').unwrap()].to_string())
            .collect()
    };
    let next = |page: &str| -> Option<String> {
        let at = page.find(r#"<a class="next" href=""#)?;
        let rest = &page[at + r#"<a class="next" href=""#.len()..];
        Some(rest[..rest.find('"').unwrap()].replace("&amp;", "&"))
    };
    for start in ["/retention", "/retention?markers=all"] {
        let mut seen = Vec::new();
        let mut url = format!("{}{start}", inspector.base);
        let mut pages = 0;
        loop {
            let (status, _, page) = get(&url).await;
            assert_eq!(status, StatusCode::OK, "{page}");
            let shown = listed(&page);
            assert!(shown.len() <= 100, "{}", shown.len());
            seen.extend(shown);
            pages += 1;
            match next(&page) {
                Some(path) => url = format!("{}{path}", inspector.base),
                None => break,
            }
            assert!(pages < 10, "paging ends");
        }
        assert_eq!(pages, 3, "{start}");
        assert_eq!(seen, ids, "{start}: every marker once, oldest first");
    }
    let (status, _, body) = get(&format!("{}/retention?after=nonsense", inspector.base)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn timers_and_signal_deadlines_show_on_the_run_page() {
    use std::time::Duration;

    use memo_runtime::workflow::{Context, Workflow};

    let folder = Folder::empty();
    let runtime = folder.runtime();
    let napping = Workflow::new("napping", |ctx: Context, _: ()| async move {
        ctx.sleep(Duration::from_secs(86_400)).await?;
        Ok::<_, memo_runtime::Error>(())
    });
    let deciding = Workflow::new("deciding", |ctx: Context, _: ()| async move {
        let ok: Option<bool> = ctx
            .wait_for_signal_timeout("go", Duration::from_secs(86_400))
            .await?;
        Ok::<_, memo_runtime::Error>(ok)
    });
    runtime
        .run(&support::run("nap-1"), &(), &napping)
        .await
        .expect_err("suspends in its sleep");
    runtime
        .run(&support::run("decide-1"), &(), &deciding)
        .await
        .expect_err("suspends in its wait");
    let inspector = Inspector::start(&folder.url, &[]);

    let (_, _, nap) = get(&format!("{}/runs/nap-1", inspector.base)).await;
    assert!(nap.contains("Sleeps until"), "{nap}");
    assert!(
        nap.contains("memo.sleep") && nap.contains("wakes at"),
        "{nap}"
    );
    let (_, _, decide) = get(&format!("{}/runs/decide-1", inspector.base)).await;
    assert!(
        decide.contains("Waits for the signal <code>go</code> until"),
        "{decide}"
    );
    assert!(decide.contains("signal deadline"), "{decide}");
    assert!(
        decide.contains("/runs/decide-1/signal?name=go&amp;payload=false"),
        "a reject button: {decide}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_page_lists_memo_entries_and_never_a_blobs_object_as_one() {
    use memo_runtime::blob::{Blob, BlobWriter};
    use memo_runtime::workflow::{Context, Workflow};

    let folder = Folder::empty();
    let runtime = folder.runtime();
    let archiving = Workflow::new("archiving", |ctx: Context, _: ()| async move {
        let blob: Blob = ctx
            .step("archive", |memo| async move {
                memo.put("index", b"one entry").await?;
                let mut writer = BlobWriter::new(&memo);
                writer.write(b"a large value, streamed").await?;
                writer.finish().await
            })
            .await?;
        Ok::<_, memo_runtime::Error>(blob.size())
    });
    runtime
        .run(&support::run("archive-1"), &(), &archiving)
        .await
        .unwrap();
    let inspector = Inspector::start(&folder.url, &[]);

    let (status, _, page) = get(&format!("{}/runs/archive-1", inspector.base)).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    // The step's memo entry is listed; the blob's object, in the same
    // folder of the step, is not an entry.
    assert!(page.contains("<td>memo</td>"), "{page}");
    assert!(!page.contains("blobs"), "{page}");
}
