import GatewayTLS
import Foundation
import NIOCore

/// Reports the handshake and every received line, and echoes bytes back.
final class EchoRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let events: ServerEvents

    init(events: ServerEvents) {
        self.events = events
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let completed = event as? TLSHandshakeCompleted {
            self.events.yield(.handshake(alpn: completed.negotiatedALPN))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        self.events.yield(.received(String(buffer: buffer)))
        context.writeAndFlush(self.wrapOutboundOut(buffer), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.events.yield(.closed)
        context.fireChannelInactive()
    }
}

/// Just enough HTTP/1.1 for curl: `GET /` → "hello", `GET /big` → the test
/// payload in ONE write (exercises slicing and back-pressure in the TLS
/// handler), `POST /upload` → "<bytes> <checksum>" of the body. Every
/// response closes the connection. With `manualRead` it calls `read()` itself
/// (for servers with autoRead off).
final class MiniHTTPResponder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let events: ServerEvents
    private let payload: [UInt8]
    private let manualRead: Bool
    private var head: [UInt8] = []
    private var bodyExpected: Int?
    private var bodyChecksum = TLSTestSupport.Checksum()
    private var responded = false

    init(events: ServerEvents, payload: [UInt8] = [], manualRead: Bool = false) {
        self.events = events
        self.payload = payload
        self.manualRead = manualRead
    }

    func channelActive(context: ChannelHandlerContext) {
        if self.manualRead { context.read() }
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let completed = event as? TLSHandshakeCompleted {
            self.events.yield(.handshake(alpn: completed.negotiatedALPN))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.responded else { return }
        var buffer = self.unwrapInboundIn(data)
        if let expected = self.bodyExpected {
            self.consumeBody(context: context, buffer: &buffer, expected: expected)
            return
        }
        self.head.append(contentsOf: buffer.readableBytesView)
        buffer.moveReaderIndex(to: buffer.writerIndex)
        if self.head.starts(with: Array("PRI * HTTP/2.0".utf8)) {
            self.events.yield(.http2Preface)
            self.responded = true
            context.close(promise: nil)
            return
        }
        guard let end = self.headEnd() else { return }
        let headText = String(decoding: self.head[..<end], as: UTF8.self)
        let rest = Array(self.head[(end + 4)...])
        let requestLine = headText.split(separator: "\r\n").first.map(String.init) ?? ""
        if requestLine.hasPrefix("POST /upload ") {
            let length =
                headText.split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
            self.bodyExpected = length
            var restBuffer = context.channel.allocator.buffer(bytes: rest)
            self.consumeBody(context: context, buffer: &restBuffer, expected: length)
        } else if requestLine.hasPrefix("GET /big ") {
            self.respond(context: context, body: context.channel.allocator.buffer(bytes: self.payload), report: true)
        } else {
            self.respond(context: context, body: context.channel.allocator.buffer(string: "hello"), report: false)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.manualRead && !self.responded { context.read() }
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.events.yield(.closed)
        context.fireChannelInactive()
    }

    private func consumeBody(context: ChannelHandlerContext, buffer: inout ByteBuffer, expected: Int) {
        self.bodyChecksum.update(buffer)
        buffer.moveReaderIndex(to: buffer.writerIndex)
        if self.bodyChecksum.count >= expected {
            self.events.yield(.upload(bytes: self.bodyChecksum.count, checksum: self.bodyChecksum.hex))
            let answer = "\(self.bodyChecksum.count) \(self.bodyChecksum.hex)"
            self.respond(context: context, body: context.channel.allocator.buffer(string: answer), report: false)
        }
    }

    private func headEnd() -> Int? {
        guard self.head.count >= 4 else { return nil }
        for index in 0...(self.head.count - 4)
        where self.head[index] == 13 && self.head[index + 1] == 10 && self.head[index + 2] == 13
            && self.head[index + 3] == 10
        {
            return index
        }
        return nil
    }

    private func respond(context: ChannelHandlerContext, body: ByteBuffer, report: Bool) {
        self.responded = true
        let length = body.readableBytes
        let header = "HTTP/1.1 200 OK\r\nContent-Length: \(length)\r\nConnection: close\r\n\r\n"
        context.write(self.wrapOutboundOut(context.channel.allocator.buffer(string: header)), promise: nil)
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(self.wrapOutboundOut(body), promise: written)
        let events = self.events
        written.futureResult.assumeIsolated().whenComplete { result in
            if report, case .success = result {
                events.yield(.bodyWritten(bytes: length))
            }
            context.close(promise: nil)
        }
    }
}

/// Client side of the garbage test: counts what the server sends back.
final class RawClientRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}
