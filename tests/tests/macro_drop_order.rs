//! `#[traced_async]` changes nothing a program observes about its
//! arguments, locals and temporaries: the same `async fn`s, written once as
//! plain `async fn`s and once under the attribute, log the same events in
//! the same order on editions 2018, 2021 and 2024. Each is run to completion,
//! dropped before its first poll, and dropped while suspended at an `.await`.
//!
//! The cases are in `fixtures/drop_order/cases.rs`, compiled here (edition
//! 2024) and by the fixture crates `drop-order-2018` and `drop-order-2021`.

mod edition2024 {
    include!("../fixtures/drop_order/cases.rs");

    /// With another attribute below `#[traced_async]`, the fn stays an
    /// `async fn` around the traced body. Under `#[traced_async]
    /// #[instrument]` each case logs what the plain `async fn` logs. (Under
    /// `#[instrument]` alone it does not: tracing's own `async move` block
    /// captures only the arguments the body mentions.)
    pub fn instrumented_logs() -> Vec<CaseLogs> {
        all_logs!(plain, traced_instrumented)
    }

    #[allow(clippy::new_without_default, clippy::toplevel_ref_arg)]
    pub mod traced_instrumented {
        cases!(#[async_stack::traced_async] #[tracing::instrument(skip_all)]);
    }
}

type CaseLogs = (&'static str, Vec<String>, Vec<String>);

fn editions() -> [(&'static str, Vec<CaseLogs>); 3] {
    [
        ("2018", drop_order_2018::logs()),
        ("2021", drop_order_2021::logs()),
        ("2024", edition2024::logs()),
    ]
}

/// Each edition's cases, and the edition-2024 cases under `#[instrument]`.
fn all_forms() -> [(&'static str, Vec<CaseLogs>); 4] {
    let [e2018, e2021, e2024] = editions();
    [
        e2018,
        e2021,
        e2024,
        (
            "2024, #[instrument] below",
            edition2024::instrumented_logs(),
        ),
    ]
}

/// The two logs side by side, for a failure message.
fn side_by_side(plain: &[String], traced: &[String]) -> String {
    let mut out = format!("{:<40} | traced\n", "plain async fn");
    for i in 0..plain.len().max(traced.len()) {
        let at = |log: &[String]| log.get(i).cloned().unwrap_or_default();
        let mark = if at(plain) == at(traced) { " " } else { "*" };
        out += &format!("{:<40} |{mark}{}\n", at(plain), at(traced));
    }
    out
}

#[test]
fn traced_fns_log_what_plain_fns_log_on_every_edition() {
    let mut failures = Vec::new();
    for (edition, cases) in all_forms() {
        assert_eq!(cases.len(), 29, "edition {edition}: every case ran");
        for (case, plain, traced) in cases {
            // Each mode logged its marker and the calls in it.
            assert_eq!(
                plain.iter().filter(|e| e.starts_with("-- ")).count(),
                3,
                "{edition} {case}: {plain:?}"
            );
            if plain != traced {
                failures.push(format!(
                    "edition {edition}, case `{case}`:\n{}",
                    side_by_side(&plain, &traced)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

fn case(cases: &[CaseLogs], name: &str) -> Vec<String> {
    let (_, plain, _) = cases
        .iter()
        .find(|(case, ..)| *case == name)
        .expect("the case exists");
    plain.clone()
}

/// The contract itself, on the case of the issue: every argument, `_` and
/// the parts of a pattern included, lives until the future completes or is
/// dropped, and is dropped after the body's locals, last argument first.
#[test]
fn arguments_live_as_long_as_the_future() {
    let [.., (_, cases)] = editions();
    assert_eq!(
        case(&cases, "wild"),
        [
            "-- completed",
            "called",
            "body",
            "drop local",
            "drop b",
            "drop a",
            "drop arg0",
            "returned ()",
            "-- dropped before the first poll",
            "called",
            "drop arg0",
            "drop a",
            "drop b",
            "dropped",
            "-- dropped at an .await",
            "called",
            "polled: ready false",
            "drop local",
            "drop b",
            "drop a",
            "drop arg0",
            "dropped",
        ]
    );
}

/// The fixture crates really are on their editions: a tail expression's
/// temporaries are dropped after the body's locals before edition 2024, and
/// before them from 2024 on (in both forms, by the test above).
#[test]
fn tail_temporaries_follow_the_edition() {
    let [(_, e2018), (_, e2021), (_, e2024)] = editions();
    let completed = |log: Vec<String>| -> Vec<String> {
        log.into_iter()
            .skip(2)
            .take_while(|e| !e.starts_with("returned"))
            .collect()
    };
    let before_2024 = ["drop local", "unlock a", "drop a"];
    assert_eq!(
        completed(case(&e2018, "tail_borrows_argument")),
        before_2024
    );
    assert_eq!(
        completed(case(&e2021, "tail_borrows_argument")),
        before_2024
    );
    assert_eq!(
        completed(case(&e2024, "tail_borrows_argument")),
        ["unlock a", "drop local", "drop a"]
    );
}
