import { createServer, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';

/**
 * A forward proxy on loopback that demands HTTP basic auth and tunnels CONNECT requests. tinyproxy's
 * BasicAuth takes only letters, digits, `-`, `.` and `_`; this one takes any password, so a test can
 * use one with `@`, `:` and `/` in it.
 */
export interface AuthProxy {
  port: number;
  /** CONNECT targets it tunnelled, in order */
  tunnels: string[];
  /** requests refused for a missing or wrong Proxy-Authorization */
  refused: number;
  close(): Promise<void>;
}

export async function startAuthProxy(user: string, password: string): Promise<AuthProxy> {
  const expected = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  const sockets = new Set<Socket>();
  const state = { tunnels: [] as string[], refused: 0 };
  const server = createServer((_req, res) => {
    res.writeHead(405, { connection: 'close' }).end('CONNECT only\n');
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    if (req.headers['proxy-authorization'] !== expected) {
      state.refused++;
      client.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    const [host, port] = [req.url!.replace(/:\d+$/, '').replace(/^\[|\]$/g, ''), Number(/:(\d+)$/.exec(req.url!)?.[1] ?? 443)];
    state.tunnels.push(req.url!);
    const upstream = connect(port, host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    get tunnels() {
      return state.tunnels;
    },
    get refused() {
      return state.refused;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
