import Testing

@testable import AssertGateCore

/// The byte sets as bit masks, checked against their RFC 3986 spelling, and
/// the authority grammar on the shapes a client can send.
@Suite struct URISyntaxTests {
    private static let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)
    private static let subDelims = Set("!$&'()*+,;=".utf8)

    @Test(arguments: [
        ("target", URISyntax.Class.target, unreserved.union(subDelims).union("%:@/?[]".utf8)),
        ("regName", URISyntax.Class.regName, unreserved.union(subDelims).union("%".utf8)),
        ("ipLiteral", URISyntax.Class.ipLiteral, unreserved.union(subDelims).union(":".utf8)),
    ])
    func eachMaskHoldsExactlyItsBytes(name: String, mask: (UInt64, UInt64), bytes: Set<UInt8>) {
        for b in 0...255 {
            let byte = UInt8(b)
            #expect(URISyntax.has(mask, byte) == bytes.contains(byte), "\(name): byte \(b)")
        }
    }

    @Test func authoritiesAreHostAndPortOnly() {
        for ok in ["a", "api.example", "API.example:8443", "10.0.0.1:80", "[::1]", "[::1]:8080", "[v1.x]", "h:", "a%41b", "x_y"] {
            #expect(URISyntax.isAuthority(ok), "\(ok)")
        }
        for bad in [
            "", ":80", "user@host", "host/x", "host?q", "host#f", "a b", "host:8o", "host:1:2", "[::1", "[]", "[::1]x",
            "caf\u{E9}", "\"q\"", "host\r\nx: y", "ho\tst",
        ] {
            #expect(!URISyntax.isAuthority(bad), "\(bad.debugDescription)")
        }
    }

    @Test func targetsHoldNoFragmentSpaceOrNonASCII() {
        for ok in ["/", "*", "/a/b?c=d&e=%20", "/a:b@c!$&'()*+,;=", "/[::1]"] { #expect(URISyntax.isTarget(ok), "\(ok)") }
        for bad in ["/a#b", "/a b", "/a\u{FF}", "/a{b}", "/a|b", "/a\"b", "/a\\b", "/a^b", "/a`b", "/a<b>", "/\r\n"] {
            #expect(!URISyntax.isTarget(bad), "\(bad.debugDescription)")
        }
    }
}
