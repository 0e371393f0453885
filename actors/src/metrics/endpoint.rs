//! The `/metrics` endpoint and the event-loop lag meter: the parts of metrics that run
//! on an Arbiter.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use actix::clock::Instant;
use actix::prelude::*;
use actix_http::body::BoxBody;
use actix_http::header::{HeaderValue, CONTENT_TYPE};
use actix_http::{HttpServiceBuilder, Method, Request, Response, StatusCode};
use actix_service::{fn_service, Service, ServiceFactory};

use super::Metrics;

/// Serve `GET /metrics` on `addr` from the current Arbiter. Returns the bound address
/// (ask for port 0 to get a free one).
pub fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<SocketAddr> {
    let std_listener = std::net::TcpListener::bind(addr)?;
    std_listener.set_nonblocking(true)?;
    let local = std_listener.local_addr()?;
    let listener = tokio::net::TcpListener::from_std(std_listener)?;
    actix_rt::spawn(async move {
        let factory = HttpServiceBuilder::default().h1(fn_service(move |req: Request| {
            let metrics = Arc::clone(&metrics);
            async move { Ok::<_, std::convert::Infallible>(answer(&req, &metrics)) }
        }));
        let service = match factory.new_service(()).await {
            Ok(s) => Rc::new(s),
            Err(e) => {
                tracing::error!(error = ?e, "metrics endpoint: cannot build the HTTP service");
                return;
            }
        };
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                actix_rt::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let service = Rc::clone(&service);
            actix_rt::spawn(async move {
                let _ = service.call((stream, Some(peer))).await;
            });
        }
    });
    Ok(local)
}

fn answer(req: &Request, metrics: &Metrics) -> Response<BoxBody> {
    if req.method() != Method::GET || req.path() != "/metrics" {
        return Response::with_body(StatusCode::NOT_FOUND, BoxBody::new("not found\n"));
    }
    let mut res = Response::with_body(StatusCode::OK, BoxBody::new(metrics.encode()));
    res.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    res
}

/// Measures event-loop lag: a tick is due every `period`; how late it runs is the lag.
pub struct LagActor {
    metrics: Arc<Metrics>,
    period: Duration,
    due: Option<Instant>,
}

impl LagActor {
    /// A lag meter ticking every `period`.
    pub fn new(metrics: Arc<Metrics>, period: Duration) -> Self {
        Self {
            metrics,
            period,
            due: None,
        }
    }
}

impl Actor for LagActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.due = Some(Instant::now() + self.period);
        ctx.run_interval(self.period, |act, _ctx| {
            let now = Instant::now();
            if let Some(due) = act.due {
                act.metrics
                    .event_loop_lag
                    .observe(now.saturating_duration_since(due).as_secs_f64());
            }
            act.due = Some(now + act.period);
        });
    }
}
