import Synchronization

/// A small Prometheus registry: families of counters, gauges and histograms
/// with labels, rendered in text exposition format 0.0.4. Resolving a label
/// set takes a lock (do it once and keep the handle); incrementing a handle
/// is a relaxed atomic add on the calling thread's shard.
public final class MetricsRegistry: Sendable {
    private let families = Mutex<[any MetricFamily]>([])

    public init() {}

    public func counter(_ name: String, help: String, labelNames: [String] = []) -> MetricFamilyOf<Counter> {
        register(MetricFamilyOf(name: name, help: help, type: "counter", labelNames: labelNames) { Counter() })
    }

    public func gauge(_ name: String, help: String, labelNames: [String] = []) -> MetricFamilyOf<Gauge> {
        register(MetricFamilyOf(name: name, help: help, type: "gauge", labelNames: labelNames) { Gauge() })
    }

    public func histogram(
        _ name: String, help: String, labelNames: [String] = [], buckets: [Double] = Histogram.defaultBuckets
    ) -> MetricFamilyOf<Histogram> {
        let bounds = Array(Set(buckets.filter { $0.isFinite })).sorted()
        return register(MetricFamilyOf(name: name, help: help, type: "histogram", labelNames: labelNames) {
            Histogram(upperBounds: bounds)
        })
    }

    private func register<F: MetricFamily>(_ family: F) -> F {
        families.withLock { list in
            precondition(!list.contains { $0.name == family.name }, "metric \(family.name) registered twice")
            list.append(family)
        }
        return family
    }

    /// `text/plain; version=0.0.4` body.
    public func exposition() -> String {
        let list = families.withLock { $0 }
        var out = ""
        for family in list { family.render(into: &out) }
        return out
    }

    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"
}

public protocol MetricFamily: Sendable {
    var name: String { get }
    func render(into out: inout String)
}

/// One metric name with its label sets.
public final class MetricFamilyOf<Metric: Sendable & AnyObject>: MetricFamily, Sendable {
    public let name: String
    public let help: String
    let type: String
    public let labelNames: [String]
    private let make: @Sendable () -> Metric
    private let children = Mutex<[[String]: Metric]>([:])
    private let order = Mutex<[[String]]>([])

    init(name: String, help: String, type: String, labelNames: [String], make: @escaping @Sendable () -> Metric) {
        self.name = name
        self.help = help
        self.type = type
        self.labelNames = labelNames
        self.make = make
    }

    /// The metric for these label values (in `labelNames` order), created on first use.
    public func labels(_ values: String...) -> Metric { labels(values) }

    public func labels(_ values: [String]) -> Metric {
        precondition(values.count == labelNames.count, "\(name) takes labels \(labelNames)")
        return children.withLock { map in
            if let existing = map[values] { return existing }
            let metric = make()
            map[values] = metric
            order.withLock { $0.append(values) }
            return metric
        }
    }

    public func render(into out: inout String) {
        let keys = order.withLock { $0 }
        let snapshot = children.withLock { map in keys.compactMap { k in map[k].map { (k, $0) } } }
        out += "# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(type)\n"
        for (values, metric) in snapshot {
            let labels = zip(labelNames, values).map { "\($0)=\"\(Self.escapeLabel($1))\"" }
            switch metric {
            case let c as Counter:
                out += "\(name)\(Self.braces(labels)) \(c.value)\n"
            case let g as Gauge:
                out += "\(name)\(Self.braces(labels)) \(g.value)\n"
            case let h as Histogram:
                let s = h.snapshot()
                for (i, bound) in h.upperBounds.enumerated() {
                    out += "\(name)_bucket\(Self.braces(labels + ["le=\"\(Self.number(bound))\""])) \(s.cumulative[i])\n"
                }
                out += "\(name)_bucket\(Self.braces(labels + ["le=\"+Inf\""])) \(s.count)\n"
                out += "\(name)_sum\(Self.braces(labels)) \(Self.number(s.sum))\n"
                out += "\(name)_count\(Self.braces(labels)) \(s.count)\n"
            default:
                break
            }
        }
    }

    static func braces(_ labels: [String]) -> String {
        labels.isEmpty ? "" : "{" + labels.joined(separator: ",") + "}"
    }

    static func number(_ value: Double) -> String {
        if value == .infinity { return "+Inf" }
        if value == -.infinity { return "-Inf" }
        if value.isNaN { return "NaN" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    static func escapeLabel(_ value: String) -> String {
        var out = ""
        for ch in value {
            switch ch {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(ch)
            }
        }
        return out
    }

    static func escapeHelp(_ value: String) -> String {
        var out = ""
        for ch in value {
            switch ch {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.append(ch)
            }
        }
        return out
    }
}
