//! The HTML index of `/debug/pprof/`: every route, one line each, and
//! the `go tool pprof` commands that read the profiles.
//!
//! The host in the commands is the request's `Host` header (HTML-escaped,
//! since a client chooses it), or `HOST:PORT` when there is none.

/// The routes the index lists: path and query, and what it serves.
const ROUTES: &[(&str, &str)] = &[
    (
        "/debug/pprof/goroutine?debug=2",
        "every live task: state, time in state, stack with .await lines (text, streamed)",
    ),
    (
        "/debug/pprof/goroutine?debug=1",
        "the same, tasks with identical stacks coalesced with a count",
    ),
    (
        "/debug/pprof/goroutine",
        "the task stacks as a pprof profile, one sample per task (gzipped)",
    ),
    (
        "/debug/pprof/profile?seconds=30",
        "a sampler profile of N seconds, on-CPU too on Linux (pprof, gzipped)",
    ),
    (
        "/debug/async/tasks.json",
        "every live task as JSON (docs/task-dump.schema.json), streamed",
    ),
    (
        "/debug/async/folded?seconds=30",
        "a sampler profile of N seconds as folded stacks, for flamegraphs",
    ),
    (
        "/debug/async/wakes?seconds=10&format=dot",
        "the wake graph recorded for N seconds (format=dot or json)",
    ),
    (
        "/debug/async/deadlocks",
        "tasks waiting for each other through async_stack::sync locks or JoinHandles, with both .await lines",
    ),
];

/// The index page, for a request to `host` (its `Host` header).
pub(super) fn page(host: Option<&str>) -> String {
    let host = escape(host.unwrap_or("HOST:PORT"));
    let mut html = String::from(
        "<!DOCTYPE html>\n<html>\n<head><title>/debug/pprof/</title></head>\n<body>\n\
         <h1>async-stack debug endpoint</h1>\n<ul>\n",
    );
    for (path, what) in ROUTES {
        let path = escape(path);
        html.push_str(&format!("<li><a href=\"{path}\">{path}</a>: {what}</li>\n"));
    }
    html.push_str(&format!(
        "</ul>\n<pre>\ngo tool pprof -top http://{host}/debug/pprof/goroutine\n\
         go tool pprof -http=:8080 http://{host}/debug/pprof/profile?seconds=30\n</pre>\n\
         </body>\n</html>\n"
    ));
    html
}

/// `text` with `&`, `<`, `>` and `"` escaped, for HTML text and
/// attributes.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}
