//! `async_stack::http::router()` in an axum service: the same routes and
//! answers as the endpoint's own server, beside the service's routes.

mod http_common;

use async_stack::traced_async;
use hyper::Method;

use http_common::{get, request, serve_axum};

#[traced_async]
async fn hello() -> &'static str {
    "hello"
}

#[test]
fn the_router_serves_the_routes_beside_the_service() {
    let app = axum::Router::new()
        .route("/", axum::routing::get(hello))
        .merge(async_stack::http::router());
    let (_rt, addr) = serve_axum(app);

    let reply = get(addr, "/");
    assert_eq!((reply.status, reply.text()), (200, "hello"));
    let reply = get(addr, "/debug/pprof/");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type(), "text/html; charset=utf-8");
    let reply = get(addr, "/debug/pprof/goroutine?debug=2");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type(), "text/plain; charset=utf-8");
    let reply = get(addr, "/debug/async/tasks.json");
    assert_eq!(reply.status, 200);
    async_stack::TaskDump::from_json(reply.text()).expect("the dump's JSON");
    let reply = get(addr, "/debug/pprof/goroutine");
    assert_eq!(reply.body[..2], [0x1f, 0x8b]);

    let reply = request(addr, Method::POST, "/debug/pprof/goroutine", &[], "");
    assert_eq!(reply.status, 405);
    let reply = get(addr, "/debug/async/folded?seconds=x");
    assert_eq!(
        (reply.status, reply.text()),
        (
            400,
            "400 Bad Request: seconds=x is not a whole number of seconds (from 1 to 60)\n"
        )
    );
    assert_eq!(get(addr, "/debug/nope").status, 404);
}

#[test]
fn the_builder_router_requires_its_token() {
    let app = async_stack::http::Builder::new()
        .bearer_token("t0k")
        .router();
    let (_rt, addr) = serve_axum(app);
    assert_eq!(get(addr, "/debug/pprof/").status, 401);
    let ok = request(
        addr,
        Method::GET,
        "/debug/pprof/",
        &[("authorization", "Bearer t0k")],
        "",
    );
    assert_eq!(ok.status, 200);
}
