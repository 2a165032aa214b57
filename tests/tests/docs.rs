//! The documentation holds together: every relative link in the README,
//! the other root pages and `docs/` reaches a file that exists (and a
//! heading that exists, when it names one), every page under `docs/` is
//! compiled as doctests (`tests/src/lib.rs`), the stored-format page shows
//! the layout that `layout.rs` documents, and the README's two commands are
//! the quickstart and the test command `.ci/run` runs.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// Every `.md` file under `dir`, recursively, sorted.
fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    let mut pages = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in fs::read_dir(&folder).unwrap_or_else(|e| panic!("{}: {e}", folder.display())) {
            let path = entry.expect("a readable folder").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// The pages whose links are checked: the root's `.md` files and every page
/// under `docs/`.
fn checked_pages() -> Vec<PathBuf> {
    let root = repo_root();
    let mut pages: Vec<PathBuf> = fs::read_dir(&root)
        .expect("the repository root")
        .map(|entry| entry.expect("a readable root").path())
        .filter(|path| path.is_file() && path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.sort();
    pages.extend(markdown_under(&root.join("docs")));
    pages
}

/// `line` without its inline code spans (a link's target is never inside
/// one; a span's brackets would look like a link).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The targets of the inline links (`[text](target)`) of a page, with their
/// line numbers, outside fenced code blocks.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    let mut in_fence = false;
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push((number + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    targets
}

/// The anchors GitHub gives a page's headings: lower case, letters, digits,
/// `-` and `_` kept, spaces made `-`, everything else dropped.
fn heading_anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let anchor: String = title
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        anchors.insert(anchor);
    }
    anchors
}

/// The broken links of `page`, each as "page:line: target: what is wrong".
fn broken_links(root: &Path, page: &Path) -> Vec<String> {
    let text = fs::read_to_string(page).expect("a readable page");
    let shown = page
        .strip_prefix(root)
        .unwrap_or(page)
        .display()
        .to_string();
    let mut broken = Vec::new();
    for (line, target) in link_targets(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (target.as_str(), None),
        };
        let resolved = if file.is_empty() {
            page.to_path_buf()
        } else {
            page.parent().expect("a page is in a folder").join(file)
        };
        if !resolved.exists() {
            broken.push(format!("{shown}:{line}: {target}: no such file"));
            continue;
        }
        if let Some(anchor) = anchor {
            let is_markdown = resolved.extension().is_some_and(|ext| ext == "md");
            if is_markdown {
                let linked = fs::read_to_string(&resolved).expect("a readable page");
                if !heading_anchors(&linked).contains(anchor) {
                    broken.push(format!("{shown}:{line}: {target}: no heading #{anchor}"));
                }
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_reaches_a_file_and_heading_that_exist() {
    let root = repo_root();
    let pages = checked_pages();
    assert!(
        pages.iter().any(|p| p.ends_with("README.md")) && pages.len() > 5,
        "found the pages: {pages:?}"
    );
    let broken: Vec<String> = pages
        .iter()
        .flat_map(|page| broken_links(&root, page))
        .collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn a_link_to_a_missing_file_or_heading_is_found() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("there.md"),
        "# A page: here\n\n## Its `part`\n",
    )
    .unwrap();
    let page = dir.path().join("page.md");
    fs::write(
        &page,
        "[ok](there.md) [ok](there.md#a-page-here) [ok](there.md#its-part) [ok](#top)\n\
         # Top\n\
         [gone](moved.md) [`code [x]`](there.md#no-such) `[not](a-link.md)`\n\
         ```\n[in a fence](nowhere.md)\n```\n[web](https://example.invalid/x.md)\n",
    )
    .unwrap();
    assert_eq!(
        broken_links(dir.path(), &page),
        vec![
            "page.md:3: moved.md: no such file".to_string(),
            "page.md:3: there.md#no-such: no heading #no-such".to_string(),
        ]
    );
}

#[test]
fn every_docs_page_is_compiled_as_doctests() {
    let root = repo_root();
    let lib = fs::read_to_string(root.join("tests/src/lib.rs")).expect("tests/src/lib.rs");
    let missing: Vec<String> = markdown_under(&root.join("docs"))
        .iter()
        .map(|page| {
            let relative = page.strip_prefix(&root).unwrap().display().to_string();
            format!("include_str!(\"../../{relative}\")")
        })
        .filter(|include| !lib.contains(include.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "pages whose examples no test compiles; add them to `docs` in tests/src/lib.rs:\n{}",
        missing.join("\n")
    );
}

/// The rows of the first Markdown table between `start` and `end`, or of
/// the `//! |` lines of a Rust file's module docs.
fn table_rows(lines: impl Iterator<Item = String>) -> Vec<String> {
    lines
        .map(|line| line.trim().to_string())
        .filter(|line| line.starts_with('|'))
        .collect()
}

#[test]
fn the_stored_format_page_shows_the_layout_table() {
    let root = repo_root();
    let layout = fs::read_to_string(root.join("memo-runtime/src/layout.rs")).unwrap();
    let documented = table_rows(
        layout
            .lines()
            .take_while(|line| line.starts_with("//!"))
            .map(|line| line.trim_start_matches("//!").to_string()),
    );
    let page = fs::read_to_string(root.join("docs/guide/stored-format.md")).unwrap();
    let start = page
        .find("<!-- layout table")
        .expect("the table's start marker");
    let end = page
        .find("<!-- end of layout table -->")
        .expect("its end marker");
    let shown = table_rows(page[start..end].lines().map(str::to_string));
    assert!(documented.len() > 5, "layout.rs's table: {documented:?}");
    assert_eq!(
        shown, documented,
        "docs/guide/stored-format.md's path table differs from memo-runtime/src/layout.rs's"
    );
}

/// The commands of the README's `sh` blocks.
fn shell_commands(text: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_sh = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_sh = !in_sh && trimmed == "```sh";
        } else if in_sh && !trimmed.is_empty() {
            commands.push(trimmed.to_string());
        }
    }
    commands
}

#[test]
fn the_readmes_two_commands_run_the_quickstart_and_the_tests_ci_runs() {
    let root = repo_root();
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let commands = shell_commands(&readme);
    assert_eq!(
        commands,
        [
            "cargo run -p memo-examples --bin quickstart",
            "cargo test --workspace"
        ],
        "the README's commands"
    );
    assert!(
        root.join("examples/src/bin/quickstart.rs").is_file(),
        "the quickstart example exists"
    );
    let ci = fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|line| line.trim() == commands[1]),
        ".ci/run runs the README's test command `{}`",
        commands[1]
    );
}
