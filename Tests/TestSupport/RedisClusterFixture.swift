import Foundation

import AssertGateRedis

/// A private Redis Cluster of `masters` nodes (no replicas) on free loopback
/// ports, each `redis-server --cluster-enabled yes` with its node file in a
/// directory of its own. The slots are split evenly (`CLUSTER ADDSLOTS`), the
/// nodes introduced with `CLUSTER MEET`, and the fixture is ready when every
/// node reports `cluster_state:ok` and sees every other: polled with a
/// deadline, as gossip between external processes takes its time.
public final class RedisClusterFixture: @unchecked Sendable {
    /// The masters first, then replicas added with `addReplica`.
    public private(set) var nodes: [RedisServerFixture]
    public private(set) var ids: [String]
    private var directories: [URL]
    private let masterCount: Int

    public init(masters: Int = 3) throws {
        var nodes: [RedisServerFixture] = []
        var directories: [URL] = []
        do {
            for _ in 0..<masters {
                let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ag-cluster-\(UUID().uuidString)")
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
                directories.append(dir)
                nodes.append(try RedisServerFixture(
                    extraArguments: ["--dir", dir.path, "--cluster-node-timeout", "5000"], cluster: true))
            }
            let per = RedisHashSlot.count / masters
            for (i, node) in nodes.enumerated() {
                let end = i == masters - 1 ? RedisHashSlot.count - 1 : (i + 1) * per - 1
                try Self.expectOK(node.run(["CLUSTER", "ADDSLOTS"] + (i * per...end).map(String.init)), "ADDSLOTS")
            }
            for node in nodes.dropFirst() {
                try Self.meet(node, nodes[0])
            }
            ids = try nodes.map { try $0.text("CLUSTER", "MYID") }
            masterCount = masters
            self.nodes = nodes
            self.directories = directories
            try waitUntil("every node sees the whole cluster") { try self.isConsistent() }
        } catch {
            for n in nodes { n.stop() }
            for d in directories { try? FileManager.default.removeItem(at: d) }
            throw error
        }
    }

    deinit { stop() }

    /// `CLUSTER MEET` with the bus port spelled out (the nodes do not use the default).
    private static func meet(_ node: RedisServerFixture, _ known: RedisServerFixture) throws {
        let bus = known.clusterPort ?? known.port + 10000
        try expectOK(node.run(["CLUSTER", "MEET", "127.0.0.1", String(known.port), String(bus)]), "MEET")
    }

    public func stop() {
        for n in nodes { n.stop() }
        for d in directories { try? FileManager.default.removeItem(at: d) }
    }

    /// `redis://127.0.0.1:<port>` of every node.
    public var seedURLs: [String] { nodes.map { "redis://127.0.0.1:\($0.port)" } }

    /// The node that owns `slot` (as the fixture assigned it, or after `migrate`).
    public func owner(ofSlot slot: Int) throws -> Int {
        let reply = try nodes[0].run(["CLUSTER", "SLOTS"])
        guard case .array(let ranges) = reply else { throw RedisServerFixture.FixtureError.commandFailed("CLUSTER SLOTS") }
        for case .array(let r) in ranges {
            guard r.count >= 3, let start = r[0].int64, let end = r[1].int64, case .array(let node) = r[2],
                node.count >= 2, let port = node[1].int64
            else { continue }
            if start <= slot, slot <= end, let i = nodes.firstIndex(where: { $0.port == Int(port) }) { return i }
        }
        throw RedisServerFixture.FixtureError.commandFailed("slot \(slot) has no owner")
    }

    /// The first half of a slot migration: `to` imports, `from` migrates, no
    /// key moved yet (keys that do not exist on `from` are answered `-ASK`).
    public func beginMigration(slot: Int, from: Int, to: Int) throws {
        try Self.expectOK(nodes[to].run(["CLUSTER", "SETSLOT", String(slot), "IMPORTING", ids[from]]), "IMPORTING")
        try Self.expectOK(nodes[from].run(["CLUSTER", "SETSLOT", String(slot), "MIGRATING", ids[to]]), "MIGRATING")
    }

    /// The second half: every key of the slot moves (`MIGRATE`), then every
    /// node is told the new owner (the others answer `-MOVED` from then on).
    public func finishMigration(slot: Int, from: Int, to: Int) throws {
        while true {
            guard case .array(let keys) = try nodes[from].run(["CLUSTER", "GETKEYSINSLOT", String(slot), "100"]),
                !keys.isEmpty
            else { break }
            let names = keys.compactMap(\.string)
            try Self.expectOK(
                nodes[from].run(["MIGRATE", "127.0.0.1", String(nodes[to].port), "", "0", "5000", "KEYS"] + names), "MIGRATE")
        }
        for i in [to, from] + nodes.indices.filter({ $0 != to && $0 != from }) {
            try Self.expectOK(nodes[i].run(["CLUSTER", "SETSLOT", String(slot), "NODE", ids[to]]), "SETSLOT NODE")
        }
        // A node that still holds the old owner (a ping from before the
        // change that carried a higher epoch can undo it) is told again, as
        // `redis-cli --cluster fix` would.
        var told = Date()
        try waitUntil("every node agrees on slot \(slot)", detail: { "nodes that disagree: \(try self.disagreeing(slot: slot, owner: to))" }) {
            let wrong = try self.disagreeing(slot: slot, owner: to)
            if !wrong.isEmpty, Date().timeIntervalSince(told) > 1 {
                for i in wrong { _ = try self.nodes[i].run(["CLUSTER", "SETSLOT", String(slot), "NODE", self.ids[to]]) }
                told = Date()
            }
            return wrong.isEmpty
        }
    }

    /// The nodes whose `CLUSTER SLOTS` does not give `slot` to `owner`.
    private func disagreeing(slot: Int, owner: Int) throws -> [Int] {
        try nodes.indices.filter { i in
            guard case .array(let ranges) = try nodes[i].run(["CLUSTER", "SLOTS"]) else { return true }
            return !ranges.contains { range in
                guard case .array(let r) = range, r.count >= 3, let s = r[0].int64, let e = r[1].int64, case .array(let n) = r[2],
                    n.count >= 2
                else { return false }
                return s <= slot && slot <= e && n[1].int64 == Int64(nodes[owner].port)
            }
        }
    }

    public func migrate(slot: Int, from: Int, to: Int) throws {
        try beginMigration(slot: slot, from: from, to: to)
        try finishMigration(slot: slot, from: from, to: to)
    }

    /// Starts a node that replicates master `master`; ready once its
    /// replication link is up. → its index in `nodes`.
    public func addReplica(of master: Int) throws -> Int {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ag-cluster-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        directories.append(dir)
        let node = try RedisServerFixture(
            extraArguments: ["--dir", dir.path, "--cluster-node-timeout", "5000"], cluster: true)
        nodes.append(node)
        ids.append(try node.text("CLUSTER", "MYID"))
        try Self.meet(node, nodes[0])
        try waitUntil("the replica knows its master") {
            (try node.text("CLUSTER", "NODES")).contains(self.ids[master])
        }
        try Self.expectOK(node.run(["CLUSTER", "REPLICATE", ids[master]]), "REPLICATE")
        try waitUntil("the replica's link is up") {
            (try node.text("INFO", "replication")).contains("master_link_status:up")
        }
        try waitUntil("every node sees the replica") { try self.isConsistent() }
        return nodes.count - 1
    }

    /// `CLUSTER FAILOVER TAKEOVER` on `replica` (for when its master is
    /// down): it serves the master's slots at once; the live nodes learn it
    /// by gossip (waited for).
    public func takeOver(replica: Int, from master: Int) throws {
        try Self.expectOK(nodes[replica].run(["CLUSTER", "FAILOVER", "TAKEOVER"]), "FAILOVER TAKEOVER")
        let port = Int64(nodes[replica].port)
        try waitUntil("the live nodes agree the replica took over") {
            try self.nodes.indices.filter { $0 != master }.allSatisfy { i in
                guard case .array(let ranges) = try self.nodes[i].run(["CLUSTER", "SLOTS"]) else { return false }
                return ranges.contains { range in
                    guard case .array(let r) = range, r.count >= 3, case .array(let n) = r[2], n.count >= 2 else { return false }
                    return n[1].int64 == port
                }
            }
        }
    }

    /// Every node reports the cluster ok, knows every node, sees every
    /// master's slots, and gives the masters the same distinct config epochs.
    /// Nodes made with ADDSLOTS all start at epoch 0 and part them by gossip;
    /// a slot moved while that is still going on can be taken back by a stale
    /// ping, so the fixture is ready only once it is over.
    private func isConsistent() throws -> Bool {
        var views: Set<[String]> = []
        for node in nodes {
            let info = try node.text("CLUSTER", "INFO")
            guard info.contains("cluster_state:ok"), info.contains("cluster_known_nodes:\(nodes.count)") else { return false }
            guard case .array(let ranges) = try node.run(["CLUSTER", "SLOTS"]), ranges.count == masterCount else {
                return false
            }
            // CLUSTER NODES: id addr flags master ping pong config-epoch link slots...
            let masters = try node.text("CLUSTER", "NODES").split(separator: "\n").map { $0.split(separator: " ") }
                .filter { $0.count >= 8 && $0[2].contains("master") }
            let epochs = masters.map { "\($0[0])=\($0[6])" }.sorted()
            guard Set(masters.map { $0[6] }).count == masters.count else { return false }
            views.insert(epochs)
        }
        return views.count == 1
    }

    private func waitUntil(_ what: String, detail: () throws -> String = { "" }, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(30)
        while try !condition() {
            guard Date() < deadline else {
                throw RedisServerFixture.FixtureError.commandFailed("cluster: \(what): not within 30 s \((try? detail()) ?? "")")
            }
            usleep(20_000)
        }
    }

    private static func expectOK(_ reply: RESPValue, _ what: String) throws {
        guard case .status("OK") = reply else {
            throw RedisServerFixture.FixtureError.commandFailed("\(what): \(reply)")
        }
    }
}
