/// "Did you mean" for unknown config keys: the allowed key nearest by edit
/// distance (insertions, deletions, substitutions and swaps of two adjacent
/// letters, compared without case), when it is near enough to be a typo.
enum KeySuggestion {
    /// The closest allowed key, or nil when none is within the typo budget:
    /// one edit for keys of up to four letters, two up to eight, three beyond.
    /// Ties go to the alphabetically first key, so the hint is stable.
    static func closest(to name: String, in allowed: Set<String>) -> String? {
        let budget = name.count <= 4 ? 1 : (name.count <= 8 ? 2 : 3)
        var best: (key: String, distance: Int)?
        for key in allowed.sorted() {
            let d = distance(name.lowercased(), key.lowercased())
            guard d <= budget, d < key.count else { continue }
            if best.map({ d < $0.distance }) ?? true { best = (key, d) }
        }
        return best?.key
    }

    /// Optimal-string-alignment distance (Damerau-Levenshtein without
    /// editing a substring twice): "mdoe" -> "mode" is one swap.
    static func distance(_ a: String, _ b: String) -> Int {
        let x = Array(a.unicodeScalars), y = Array(b.unicodeScalars)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var table = [[Int]](repeating: [Int](repeating: 0, count: y.count + 1), count: x.count + 1)
        for i in 0...x.count { table[i][0] = i }
        for j in 0...y.count { table[0][j] = j }
        for i in 1...x.count {
            for j in 1...y.count {
                let cost = x[i - 1] == y[j - 1] ? 0 : 1
                var d = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, x[i - 1] == y[j - 2], x[i - 2] == y[j - 1] {
                    d = min(d, table[i - 2][j - 2] + 1)
                }
                table[i][j] = d
            }
        }
        return table[x.count][y.count]
    }
}
