//! The server's own metrics for `GET /metrics`: requests by operation and outcome, and a
//! latency histogram, in Prometheus' text format beside the pools' metrics.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

/// The latency buckets' upper bounds, in seconds.
const BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

#[derive(Default)]
pub struct Stats {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// (operation, outcome) → requests.
    requests: BTreeMap<(String, String), u64>,
    /// Requests at or below each bucket's bound (not cumulative here).
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Stats {
    /// Counts one request.
    pub fn record(&self, operation: &str, outcome: &str, took: Duration) {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *inner
            .requests
            .entry((operation.to_owned(), outcome.to_owned()))
            .or_default() += 1;
        let secs = took.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|b| secs <= *b) {
            inner.buckets[i] += 1;
        }
        inner.count += 1;
        inner.sum += secs;
    }

    /// The counts in the text exposition format.
    pub fn exposition(&self) -> String {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut t = String::new();
        let _ = writeln!(
            t,
            "# HELP ipamctl_server_requests_total GraphQL requests served, by operation and outcome code."
        );
        let _ = writeln!(t, "# TYPE ipamctl_server_requests_total counter");
        for ((op, outcome), n) in &inner.requests {
            let _ = writeln!(
                t,
                "ipamctl_server_requests_total{{operation=\"{}\",outcome=\"{}\"}} {n}",
                escape(op),
                escape(outcome)
            );
        }
        let _ = writeln!(
            t,
            "# HELP ipamctl_server_request_duration_seconds Time to answer a GraphQL request."
        );
        let _ = writeln!(
            t,
            "# TYPE ipamctl_server_request_duration_seconds histogram"
        );
        let mut cumulative = 0;
        for (bound, n) in BUCKETS.iter().zip(inner.buckets) {
            cumulative += n;
            let _ = writeln!(
                t,
                "ipamctl_server_request_duration_seconds_bucket{{le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            t,
            "ipamctl_server_request_duration_seconds_bucket{{le=\"+Inf\"}} {}",
            inner.count
        );
        let _ = writeln!(
            t,
            "ipamctl_server_request_duration_seconds_sum {}",
            inner.sum
        );
        let _ = writeln!(
            t,
            "ipamctl_server_request_duration_seconds_count {}",
            inner.count
        );
        t
    }
}

fn escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('"', "\\\"")
}
