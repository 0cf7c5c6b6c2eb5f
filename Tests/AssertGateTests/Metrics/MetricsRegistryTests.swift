import Testing
@testable import AssertGateCore

@Suite struct MetricsRegistryTests {
    @Test func exposesCountersGaugesAndLabelsInTextFormat() {
        let registry = MetricsRegistry()
        let requests = registry.counter("t_requests_total", help: "Requests.", labelNames: ["route", "status"])
        requests.labels("/api", "200").inc()
        requests.labels("/api", "200").inc(2)
        requests.labels("/x\"y\\z\n", "503").inc()
        let open = registry.gauge("t_open", help: "Open\nthings \\ here.")
        let g = open.labels()
        g.inc(5)
        g.dec(2)
        #expect(registry.exposition() == """
            # HELP t_requests_total Requests.
            # TYPE t_requests_total counter
            t_requests_total{route="/api",status="200"} 3
            t_requests_total{route="/x\\"y\\\\z\\n",status="503"} 1
            # HELP t_open Open\\nthings \\\\ here.
            # TYPE t_open gauge
            t_open 3

            """)
    }

    @Test func histogramBucketsAreCumulative() {
        let registry = MetricsRegistry()
        let h = registry.histogram("t_seconds", help: "Latency.", labelNames: ["upstream"], buckets: [0.1, 0.5, 1])
            .labels("legacy")
        for v in [0.05, 0.1, 0.3, 0.7, 2.0] { h.observe(v) }
        #expect(h.count == 5)
        #expect(abs(h.sum - 3.15) < 1e-9)
        #expect(registry.exposition() == """
            # HELP t_seconds Latency.
            # TYPE t_seconds histogram
            t_seconds_bucket{upstream="legacy",le="0.1"} 2
            t_seconds_bucket{upstream="legacy",le="0.5"} 3
            t_seconds_bucket{upstream="legacy",le="1"} 4
            t_seconds_bucket{upstream="legacy",le="+Inf"} 5
            t_seconds_sum{upstream="legacy"} 3.15
            t_seconds_count{upstream="legacy"} 5

            """)
    }

    @Test func concurrentIncrementsAreNotLost() async {
        let registry = MetricsRegistry()
        let counter = registry.counter("t_total", help: "x").labels()
        let hist = registry.histogram("t_h", help: "x", buckets: [1]).labels()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<10_000 {
                        counter.inc()
                        hist.observe(0.5)
                    }
                }
            }
        }
        #expect(counter.value == 80_000)
        #expect(hist.count == 80_000)
        #expect(hist.sum == 40_000)
    }

    @Test func gatewaySeriesHaveTheDocumentedNames() {
        let metrics = GatewayMetrics()
        metrics.requests.labels("/api/", "200", "verified").inc()
        metrics.rejection(.counterReplay).inc()
        metrics.upstreamRequestDuration.labels("legacy").observe(0.02)
        metrics.openConnections.labels("h2").inc()
        metrics.openStreams.inc()
        metrics.storeErrors.inc()
        metrics.configReloads.labels("success").inc()
        let text = metrics.registry.exposition()
        for line in [
            "assertgate_requests_total{route=\"/api/\",status=\"200\",trust=\"verified\"} 1",
            "assertgate_rejections_total{reason=\"counter-replay\"} 1",
            "assertgate_rejections_total{reason=\"bad-signature\"} 0",
            "assertgate_upstream_request_duration_seconds_bucket{upstream=\"legacy\",le=\"0.025\"} 1",
            "assertgate_upstream_request_duration_seconds_count{upstream=\"legacy\"} 1",
            "assertgate_open_connections{protocol=\"h2\"} 1",
            "assertgate_open_streams 1",
            "assertgate_store_errors_total 1",
            "assertgate_config_reloads_total{result=\"success\"} 1",
            "assertgate_config_reloads_total{result=\"failure\"} 0",
            "# TYPE assertgate_upstream_request_duration_seconds histogram",
        ] {
            #expect(text.contains(line + "\n"), "missing: \(line)")
        }
        // Every sample line is `name{labels} value` or `name value`.
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            #expect(line.split(separator: " ").count == 2, "bad sample line: \(line)")
        }
    }

    @Test func requestCounterCacheSharesHandles() {
        let metrics = GatewayMetrics()
        let worker1 = RequestCounterCache(metrics: metrics)
        let worker2 = RequestCounterCache(metrics: metrics)
        worker1.counter(route: "/api/", status: 200, trust: "verified").inc()
        worker2.counter(route: "/api/", status: 200, trust: "verified").inc()
        worker2.counter(route: "/api/", status: 403, trust: "invalid").inc()
        #expect(worker1.counter(route: "/api/", status: 200, trust: "verified") === worker2.counter(route: "/api/", status: 200, trust: "verified"))
        let text = metrics.registry.exposition()
        #expect(text.contains("assertgate_requests_total{route=\"/api/\",status=\"200\",trust=\"verified\"} 2\n"))
        #expect(text.contains("assertgate_requests_total{route=\"/api/\",status=\"403\",trust=\"invalid\"} 1\n"))
    }

    /// The cache keeps the last label set for a fast path: a change in any
    /// one label must still reach its own counter.
    @Test func requestCounterCacheTellsEveryLabelApart() {
        let metrics = GatewayMetrics()
        let cache = RequestCounterCache(metrics: metrics)
        let labelSets: [(String, Int, String)] = [
            ("a", 200, "none"), ("a", 200, "none"), ("b", 200, "none"), ("a", 502, "none"), ("a", 200, "verified"),
            ("a", 200, "none"),
        ]
        for (route, status, trust) in labelSets { cache.counter(route: route, status: status, trust: trust).inc() }
        let text = metrics.registry.exposition()
        #expect(text.contains("assertgate_requests_total{route=\"a\",status=\"200\",trust=\"none\"} 3\n"))
        #expect(text.contains("assertgate_requests_total{route=\"b\",status=\"200\",trust=\"none\"} 1\n"))
        #expect(text.contains("assertgate_requests_total{route=\"a\",status=\"502\",trust=\"none\"} 1\n"))
        #expect(text.contains("assertgate_requests_total{route=\"a\",status=\"200\",trust=\"verified\"} 1\n"))
    }
}
