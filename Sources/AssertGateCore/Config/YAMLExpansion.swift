import CYaml

/// How many nodes a YAML text stands for once every alias is expanded,
/// counted on libyaml's events before anything is built: Yams composes
/// first, and while composing it hashes each mapping key to find
/// duplicates, so an alias used as a key (a billion-laughs tree as a key)
/// cost that whole tree before the composed file could be counted.
enum YAMLExpansion {
    /// False when `yaml` expands to more than `limit` nodes. A text libyaml
    /// cannot parse passes: the parser that follows reports it, with its line.
    static func fits(_ yaml: String, limit: Int) -> Bool {
        Array(yaml.utf8).withUnsafeBufferPointer { input -> Bool in
            var parser = yaml_parser_t()
            guard yaml_parser_initialize(&parser) == 1 else { return true }
            defer { yaml_parser_delete(&parser) }
            yaml_parser_set_input_string(&parser, input.baseAddress, input.count)
            var counter = Counter(limit: limit)
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(&parser, &event) == 1 else { return true }
                defer { yaml_event_delete(&event) }
                switch event.type {
                case YAML_SCALAR_EVENT:
                    counter.leaf(1, anchor: Self.name(event.data.scalar.anchor))
                case YAML_ALIAS_EVENT:
                    counter.alias(Self.name(event.data.alias.anchor))
                case YAML_SEQUENCE_START_EVENT:
                    counter.open(anchor: Self.name(event.data.sequence_start.anchor))
                case YAML_MAPPING_START_EVENT:
                    counter.open(anchor: Self.name(event.data.mapping_start.anchor))
                case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                    counter.close()
                case YAML_STREAM_END_EVENT:
                    return !counter.over
                default:
                    break
                }
                if counter.over { return false }
            }
        }
    }

    private static func name(_ anchor: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        anchor.map { String(cString: $0) }
    }

    private struct Counter {
        let limit: Int
        /// Nodes counted so far, aliases expanded.
        private(set) var total = 0
        /// Open collections: their expanded size so far, and their anchor.
        private var open: [(count: Int, anchor: String?)] = []
        /// Each anchor's expanded size.
        private var anchors: [String: Int] = [:]

        init(limit: Int) { self.limit = limit }

        var over: Bool { total > limit }

        mutating func leaf(_ n: Int, anchor: String?) {
            if let anchor { anchors[anchor] = n }
            add(n)
        }

        mutating func alias(_ anchor: String?) {
            add(anchor.flatMap { anchors[$0] } ?? 1)
        }

        mutating func open(anchor: String?) {
            total += 1
            open.append((1, anchor))
        }

        mutating func close() {
            guard let done = open.popLast() else { return }
            if let anchor = done.anchor { anchors[anchor] = done.count }
            if !open.isEmpty { open[open.count - 1].count += done.count }
        }

        private mutating func add(_ n: Int) {
            total += n
            if !open.isEmpty { open[open.count - 1].count += n }
        }
    }
}
