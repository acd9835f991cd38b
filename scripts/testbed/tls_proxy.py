#!/usr/bin/env python3
"""A TLS-terminating proxy on OpenSSL (Python's ssl module), for trying bertqa's HTTPS
against Triton's HTTP port, which has no TLS of its own.

    python3 scripts/testbed/tls_proxy.py --listen 18443 --target 127.0.0.1:8000 \
        --cert server.pem --key server.key [--client-ca ca.pem]

With --client-ca it requires a client certificate issued by that CA (mutual TLS), and
accepts what OpenSSL accepts, as nginx or envoy would: X.509 v1 certificates included.
It prints "ready PORT" once it listens, and copies bytes both ways per connection.
"""
import argparse
import asyncio
import ssl
import sys


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


async def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--listen", type=int, required=True, help="port on 127.0.0.1 (0: any)")
    p.add_argument("--target", required=True, help="HOST:PORT of the plain-text server")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--client-ca", help="require client certificates issued by this CA")
    args = p.parse_args()
    host, port = args.target.rsplit(":", 1)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    context.set_alpn_protocols(["http/1.1"])
    if args.client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(args.client_ca)

    async def serve(client_reader, client_writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, up_writer), pipe(up_reader, client_writer))

    server = await asyncio.start_server(serve, "127.0.0.1", args.listen, ssl=context)
    print("ready", server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
