//! `memoctl serve` driven by a real headless browser through WebDriver: an
//! operator finds a run waiting for approval, sees its steps, approves it
//! and watches it complete; a script in a run's input shows as text and
//! does not run.
//!
//! Needs a WebDriver server for Chromium: `MEMO_WEBDRIVER_URL`
//! (`http://127.0.0.1:9515` for `chromedriver --port=9515`; `.ci/run`
//! starts one). Without it the test says "skipped" and passes. `MEMO_CHROMIUM`
//! names the browser binary if chromedriver does not find it.
//!
//! With `MEMO_SCREENSHOTS=DIR` it also saves the pages shown in the docs
//! (`inspector-run.png`, `inspector-runs.png`, `inspector-retention.png`)
//! there: `MEMO_SCREENSHOTS=$PWD/docs/img` from the repository's root
//! refreshes them.

use crate::inspector;
use crate::support;

use std::io::Write as _;
use std::time::Duration;

use inspector::{Folder, Inspector, SCRIPT_RUN};
use thirtyfour::prelude::*;

/// How often the page is reloaded while the approved run finishes, at most.
const RELOADS: usize = 300;

async fn browser(webdriver: &str) -> WebDriver {
    let mut caps = DesiredCapabilities::chrome();
    for arg in [
        "--headless=new",
        // CI runs as root, where Chromium's sandbox cannot start.
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1000",
    ] {
        caps.add_arg(arg).unwrap();
    }
    if let Ok(binary) = std::env::var("MEMO_CHROMIUM") {
        caps.set_binary(&binary).unwrap();
    }
    WebDriver::new(webdriver, caps)
        .await
        .unwrap_or_else(|e| panic!("no browser session from {webdriver}: {e}"))
}

/// The text of the first element `css` finds, waiting for it to appear (a
/// click's navigation may still be under way on a loaded machine: CI once
/// looked for the notice before the page that shows it had loaded).
async fn text(driver: &WebDriver, css: &str) -> String {
    driver
        .query(By::Css(css))
        .first()
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
        .text()
        .await
        .unwrap()
}

/// Saves the page as `$MEMO_SCREENSHOTS/<name>.png`, if that is set.
async fn screenshot(driver: &WebDriver, name: &str) -> WebDriverResult<()> {
    if let Ok(folder) = std::env::var("MEMO_SCREENSHOTS") {
        let path = std::path::Path::new(&folder).join(format!("{name}.png"));
        driver.screenshot(&path).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_approves_a_waiting_run_and_sees_it_complete_in_a_browser() {
    let Ok(webdriver) = std::env::var("MEMO_WEBDRIVER_URL") else {
        // Straight to stderr: the harness captures the output of passing tests.
        writeln!(
            std::io::stderr(),
            "skipped: MEMO_WEBDRIVER_URL not set (an_operator_approves_a_waiting_run_and_sees_it_complete_in_a_browser)"
        )
        .ok();
        return;
    };
    let folder = Folder::filled().await;
    let inspector = Inspector::start(&folder.url, &[]);
    let driver = browser(&webdriver).await;
    let checked = operate(&driver, &folder, &inspector).await;
    // Close the browser whatever happened, then report.
    driver.quit().await.ok();
    checked.unwrap();
}

async fn operate(
    driver: &WebDriver,
    folder: &Folder,
    inspector: &Inspector,
) -> WebDriverResult<()> {
    let base = &inspector.base;

    // Find the run: filter the list by its id's start, open it.
    driver.goto(format!("{base}/runs")).await?;
    driver
        .find(By::Css("input[name=prefix]"))
        .await?
        .send_keys("Ticket")
        .await?;
    driver
        .find(By::Css("form.filters button"))
        .await?
        .click()
        .await?;
    // The filtered list, once it has loaded.
    for _ in 0..100 {
        if driver
            .current_url()
            .await?
            .as_str()
            .contains("prefix=Ticket")
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let links = driver
        .query(By::Css("a.run"))
        .all_from_selector_required()
        .await?;
    assert_eq!(links.len(), 1, "one run starts with Ticket");
    links[0].click().await?;
    assert_eq!(text(driver, "h1 .run-id").await, "Ticket-42");
    assert_eq!(text(driver, "h1 .status").await, "Running");

    // Its steps: the draft with its output and its two tries, then the
    // suspended wait.
    let draft = text(driver, "#step-0").await;
    assert!(
        draft.contains("draft") && draft.contains("Re: refund"),
        "{draft}"
    );
    assert_eq!(text(driver, "#step-0 .tries").await, "2 tries");
    assert!(draft.contains(support::BUSY), "{draft}");
    let wait = text(driver, "#step-1").await;
    assert!(wait.contains("memo.wait:approval"), "{wait}");
    assert!(
        text(driver, "section.waiting").await.contains("approval"),
        "the page says what the run waits for"
    );
    screenshot(driver, "inspector-run").await?;

    // A worker resumes the run as soon as its signal is there.
    let worker = {
        let worker = Folder::at(folder.url.clone());
        tokio::spawn(async move { worker.resume_ticket(600).await })
    };

    // Approve, and confirm.
    driver.find(By::LinkText("Approve")).await?.click().await?;
    // The confirmation page, once it has loaded.
    let confirm = driver.query(By::Css("button.confirm")).first().await?;
    let question = text(driver, "main").await;
    assert!(
        question.contains("approval") && question.contains("true"),
        "{question}"
    );
    confirm.click().await?;
    assert_eq!(text(driver, "p.notice").await, "Signal sent.");

    // The run continues: reload until it has completed.
    let mut status = String::new();
    for _ in 0..RELOADS {
        driver.refresh().await?;
        status = text(driver, "h1 .status").await;
        if status == "Completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, "Completed", "the approved run completes");
    assert!(text(driver, ".output").await.contains("sent Re: refund"));
    let signals = text(driver, "table.signals").await;
    assert!(signals.contains("consumed by step 2"), "{signals}");
    assert_eq!(
        worker.await.unwrap().as_deref(),
        Some("sent Re: refund"),
        "the worker finished the run"
    );
    driver.goto(format!("{base}/runs")).await?;
    screenshot(driver, "inspector-runs").await?;
    driver.goto(format!("{base}/retention?count=1")).await?;
    screenshot(driver, "inspector-retention").await?;

    // A script in a run's input shows as text and does not run.
    driver.goto(format!("{base}/runs/{SCRIPT_RUN}")).await?;
    let input = text(driver, ".input pre").await;
    assert!(
        input.contains("<script>document.title='pwned'</script>"),
        "{input}"
    );
    assert_ne!(driver.title().await?, "pwned", "the script did not run");
    assert!(
        driver.find_all(By::Id("injected")).await?.is_empty(),
        "no element came from the input"
    );
    Ok(())
}
