#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads small files (trust anchor PEMs) without Foundation.
enum FileReader {
    static func readBytes(_ path: String, limit: Int) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let read = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            if read > 0 { out.append(contentsOf: chunk[0..<read]) }
            if out.count > limit { return nil }
            if read < chunk.count { return ferror(file) == 0 ? out : nil }
        }
    }

    static func readText(_ path: String, limit: Int) -> String? {
        readBytes(path, limit: limit).map { String(decoding: $0, as: UTF8.self) }
    }
}
