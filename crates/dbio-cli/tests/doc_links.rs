//! The README and docs/ link to each other by relative paths and heading anchors: every such
//! link must reach a file that exists and, with an anchor, a heading on that page.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn pages() -> Vec<PathBuf> {
    let mut v = vec![root().join("README.md")];
    let mut dirs = vec![root().join("docs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("docs/ is readable").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                v.push(p);
            }
        }
    }
    v
}

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(page: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut out = BTreeSet::new();
    for l in page.lines() {
        if l.starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        if let Some(h) = l.strip_prefix('#') {
            let text = h.trim_start_matches('#');
            let mut s = slug(text);
            // A repeated heading gets -1, -2, ...
            let base = s.clone();
            let mut n = 1;
            while out.contains(&s) {
                s = format!("{base}-{n}");
                n += 1;
            }
            out.insert(s);
        }
    }
    out
}

/// The targets of inline links `](target)` outside code blocks and code spans.
fn links(page: &str) -> Vec<String> {
    let mut in_code = false;
    let mut out = Vec::new();
    for l in page.lines() {
        if l.starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        let without_spans: String = l
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = without_spans.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_string());
                rest = &rest[end..];
            }
        }
    }
    out
}

fn check(page: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (file, anchor) = match target.split_once('#') {
        Some((f, a)) => (f, Some(a)),
        None => (target, None),
    };
    let dest = if file.is_empty() {
        page.to_path_buf()
    } else {
        page.parent()?.join(file)
    };
    if !dest.exists() {
        return Some(format!("{}: {target}: no such file", page.display()));
    }
    let anchor = anchor.filter(|a| !a.is_empty())?;
    if dest.extension().is_none_or(|x| x != "md") {
        return None;
    }
    let text = std::fs::read_to_string(&dest).ok()?;
    (!anchors(&text).contains(anchor))
        .then(|| format!("{}: {target}: no heading #{anchor}", page.display()))
}

#[test]
fn every_relative_link_in_the_readme_and_docs_reaches_its_file_and_heading() {
    let mut bad = Vec::new();
    let mut seen = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a readable page");
        for target in links(&text) {
            seen += 1;
            bad.extend(check(&page, &target));
        }
    }
    assert!(seen > 100, "only {seen} links found: the parser lost them");
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

#[test]
fn a_heading_anchor_follows_githubs_rules() {
    assert_eq!(
        slug(" The database's own figures (AWR-like collector)"),
        "the-databases-own-figures-awr-like-collector"
    );
    let a = anchors("# A\n## B b\n```\n# not a heading\n```\n## B b\n");
    assert!(
        a.contains("a") && a.contains("b-b") && a.contains("b-b-1") && !a.contains("not-a-heading")
    );
}
