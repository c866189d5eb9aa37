//! The routes as an axum `Router` (feature `axum`), for services already
//! on axum: [`router()`] with the default options, [`Builder::router`]
//! with others. Each route answers as the endpoint's own server does (see
//! `routes.rs`); paths that are not routes are left to the service's
//! router (its fallback, `404` by default).

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::routing::any;

use super::routes::{Route, respond};
use super::server::Builder;

/// The debug endpoint's routes as an axum [`Router`], with the default
/// options (no token; `seconds` up to 60), to merge into a service's
/// router. The handlers run on the service's runtime.
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// let app = axum::Router::new()
///     .route("/", axum::routing::get(|| async { "hello" }))
///     .merge(async_stack::http::router());
/// # let _ = app;
/// # Ok(())
/// # }
/// ```
pub fn router() -> Router {
    Builder::new().router()
}

impl Builder {
    /// The debug endpoint's routes as an axum [`Router`], with these
    /// options: [`Builder::bearer_token`], [`Builder::max_seconds`] and
    /// [`Builder::write_timeout`] apply; the address and connection
    /// options are the service's own server's.
    pub fn router(self) -> Router {
        let config = Arc::new(self.config());
        let mut router = Router::new();
        let paths = Route::ALL.iter().map(|(_, p)| *p).chain(["/debug/pprof"]);
        for path in paths {
            let config = config.clone();
            router = router.route(
                path,
                any(move |req: Request| async move {
                    respond(&config, req).await.map(axum::body::Body::new)
                }),
            );
        }
        router
    }
}
