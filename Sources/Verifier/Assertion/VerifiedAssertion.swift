/// What a successful assertion establishes.
public struct VerifiedAssertion: Sendable, Hashable {
    public var counter: UInt32
    public var extensions: AuthenticatorExtensions
}
