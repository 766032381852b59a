//! The loader, check and teardown against a real server.

use dbio_tests::{Dbio, TestCluster, assert_exit, stdout};

const SCALE: &str = "4000blocks";

/// `dbio setup` of 2 schemas of SCALE.
fn setup(pg: &TestCluster) -> Dbio {
    pg.dbio("setup").schemas(2).scale(SCALE)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_builds_one_row_per_block_frozen_and_indexed() {
    let pg = TestCluster::start(16);
    let out = setup(&pg).output();
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("loaded"), "{}", stdout(&out));
    let c = pg.client().await;
    for schema in ["user1", "user2"] {
        let row = c
            .query_one(
                &format!("SELECT count(*), count(DISTINCT (ctid::text::point)[0]), min(custid), max(custid) FROM {schema}.cf1"),
                &[],
            )
            .await
            .unwrap();
        let (rows, blocks, lo, hi): (i64, i64, i64, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        assert_eq!((rows, blocks, lo, hi), (4000, 4000, 1, 4000), "{schema}");

        // Keys are in a random physical order: consecutive keys sit in scattered blocks.
        let row = c
            .query_one(
                &format!(
                    "SELECT count(DISTINCT (ctid::text::point)[0]), \
                     max((ctid::text::point)[0]) - min((ctid::text::point)[0]) FROM {schema}.cf1 WHERE custid BETWEEN 1 AND 64"
                ),
                &[],
            )
            .await
            .unwrap();
        let (distinct, spread): (i64, f64) = (row.get(0), row.get(1));
        assert_eq!(distinct, 64, "{schema}: 64 keys must touch 64 blocks");
        assert!(
            spread > 1000.0,
            "{schema}: 64 consecutive keys span only {spread} blocks"
        );

        let plan: String = c
            .simple_query(&format!(
                "EXPLAIN SELECT count(c2) FROM {schema}.cf1 WHERE custid BETWEEN 100 AND 163"
            ))
            .await
            .unwrap()
            .iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            plan.contains("i_cf1"),
            "{schema}: the range read must use the index:\n{plan}"
        );

        let row = c
            .query_one(
                "SELECT c.relpages, c.relallvisible, s.n_dead_tup, s.last_vacuum IS NOT NULL, s.last_analyze IS NOT NULL, \
                        pg_relation_size(c.oid) \
                 FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid \
                 WHERE s.schemaname = $1 AND s.relname = 'cf1'",
                &[&schema],
            )
            .await
            .unwrap();
        let (pages, visible, dead, vacuumed, analyzed, bytes): (i32, i32, i64, bool, bool, i64) = (
            row.get(0),
            row.get(1),
            row.get(2),
            row.get(3),
            row.get(4),
            row.get(5),
        );
        assert_eq!(pages, 4000, "{schema} pages");
        assert_eq!(
            visible, pages,
            "{schema}: every page all-visible after VACUUM FREEZE"
        );
        assert_eq!(dead, 0, "{schema}: no dead tuples");
        assert!(
            vacuumed && analyzed,
            "{schema}: vacuumed {vacuumed}, analyzed {analyzed}"
        );
        assert!(
            bytes >= 31 << 20,
            "{schema}: table is {bytes} bytes, expected at least 31 MB"
        );

        let comment: Option<String> = c
            .query_one(
                "SELECT obj_description($1::text::regnamespace, 'pg_namespace')",
                &[&schema],
            )
            .await
            .unwrap()
            .get(0);
        let comment = comment.unwrap_or_default();
        let mark: serde_json::Value = serde_json::from_str(&comment).unwrap();
        let m = &mark["dbio"];
        assert_eq!(m["format"], 1, "{comment}");
        assert_eq!(m["state"], "complete", "{comment}");
        assert_eq!(m["prefix"], "user", "{comment}");
        assert_eq!(
            m["schema"],
            if schema == "user1" { 1 } else { 2 },
            "{comment}"
        );
        assert_eq!(
            (m["schemas"].clone(), m["scale_blocks"].clone()),
            (2.into(), 4000.into())
        );
        assert_eq!(m["id"].as_str().map(str::len), Some(32), "{comment}");
        for (kind, relname) in [("pg_class", "cf1"), ("pg_class", "i_cf1")] {
            let c2: Option<String> = c
                .query_one(
                    &format!("SELECT obj_description('{schema}.{relname}'::regclass, '{kind}')"),
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            let object: serde_json::Value = serde_json::from_str(&c2.unwrap_or_default()).unwrap();
            assert_eq!(
                object["dbio"]["id"], m["id"],
                "{schema}.{relname} carries the data set id"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_passes_then_names_the_schema_that_lost_a_row() {
    let pg = TestCluster::start(16);
    assert_exit(&setup(&pg).output(), 0);
    let check = pg.dbio("check").schemas(2).scale(SCALE);
    let out = check.output();
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains("user1") && text.contains("user2") && text.contains("check passed"),
        "{text}"
    );
    assert!(text.contains("rows 4000/4000"), "{text}");

    let c = pg.client().await;
    c.execute("DELETE FROM user2.cf1 WHERE custid = 17", &[])
        .await
        .unwrap();
    let out = check.output();
    assert_exit(&out, 1);
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("user2"))
        .unwrap_or_default();
    assert!(
        line.contains("FAIL") && line.contains("rows 3999, expected 4000"),
        "{text}"
    );
    let line1 = text
        .lines()
        .find(|l| l.starts_with("user1"))
        .unwrap_or_default();
    assert!(line1.contains(" ok "), "{text}");
    assert!(text.contains("check FAILED for user2"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_over_a_complete_set_changes_nothing_without_force() {
    let pg = TestCluster::start(16);
    assert_exit(&setup(&pg).output(), 0);
    let c = pg.client().await;
    let before = filenodes(&c).await;
    let out = setup(&pg).output();
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.matches("kept (already complete)").count() == 2,
        "{text}"
    );
    assert_eq!(
        filenodes(&c).await,
        before,
        "setup without --force rewrote a table"
    );

    assert_exit(&setup(&pg).arg("--force").output(), 0);
    let after = filenodes(&c).await;
    assert_ne!(after.0, before.0, "--force must rebuild user1.cf1");
}

async fn filenodes(c: &tokio_postgres::Client) -> (i64, i64) {
    let r = c
        .query_one(
            "SELECT pg_relation_filenode('user1.cf1')::bigint, pg_relation_filenode('user2.cf1')::bigint",
            &[],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_drops_only_what_dbio_created() {
    let pg = TestCluster::start(16);
    let c = pg.client().await;
    // A foreign schema that looks like dbio's, and a foreign table inside a dbio schema.
    c.batch_execute("CREATE SCHEMA user9; CREATE TABLE user9.cf1 (custid bigint); INSERT INTO user9.cf1 VALUES (1);")
        .await
        .unwrap();
    assert_exit(&setup(&pg).output(), 0);
    c.batch_execute("CREATE TABLE user2.mine (x int); INSERT INTO user2.mine VALUES (42);")
        .await
        .unwrap();

    let out = pg.dbio("teardown").output();
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains("schema user1") && text.contains("--yes"),
        "{text}"
    );
    assert!(
        text.contains("user2 stays") && text.contains("mine"),
        "{text}"
    );
    assert!(
        !text.contains("user9"),
        "teardown must not list a schema it did not create: {text}"
    );
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname IN ('user1','user2')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2, "without --yes nothing is dropped");

    let out = pg.dbio("teardown").arg("--yes").output();
    assert_exit(&out, 0);
    let names: Vec<String> = c
        .query(
            "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'user%' ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(names, vec!["user2", "user9"]);
    let kept: i64 = c
        .query_one("SELECT count(*) FROM user9.cf1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 1, "the foreign user9.cf1 must be untouched");
    let mine: i32 = c
        .query_one("SELECT x FROM user2.mine", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(mine, 42);
    let cf1: i64 = c
        .query_one("SELECT count(*) FROM pg_class WHERE relname = 'cf1' AND relnamespace = 'user2'::regnamespace", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(cf1, 0, "dbio's own table in user2 is dropped");

    // setup refuses to build over the foreign schema even with --force.
    let out = pg
        .dbio("setup")
        .schemas(9)
        .scale("100blocks")
        .arg("--force")
        .quiet()
        .output();
    assert_exit(&out, 2);
    assert!(
        dbio_tests::stderr(&out).contains("user9"),
        "{}",
        dbio_tests::stderr(&out)
    );
    let kept: i64 = c
        .query_one("SELECT count(*) FROM user9.cf1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 1);
}
