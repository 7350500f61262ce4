// A fake Hugging Face Hub on loopback for the `loom pull` tests (node's standard library only).
// It speaks the parts of the Hub's HTTP API that loom uses, the way huggingface.co answers them:
//   GET /api/models/ORG/NAME/revision/REV        {id, sha, siblings}
//   GET /api/models/ORG/NAME/tree/REV?recursive   [{type, path, size, oid, lfs: {oid, size}}]
//   GET /ORG/NAME/resolve/REV/PATH               LFS files: 302 to localhost/cdn/...; others: the bytes
//   GET /cdn/ORG/NAME/PATH                         the bytes, with Range support
// Usage: node fake_hub.js CONFIG.json LOG.jsonl. Prints "PORT <n>" once listening; appends one
// JSON line per request to LOG. CONFIG: {"repos": {"org/name": {"commit", "token"?, "files":
// [{"path", "source", "lfs"?, "drop_after"? (the first download of it stops after this many
// bytes), "corrupt"? (serve bytes that differ from the listed sha256)}]}}}.
'use strict';
const http = require('http');
const fs = require('fs');
const crypto = require('crypto');

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const logPath = process.argv[3];
const dropped = new Set();

for (const repo of Object.values(config.repos)) {
  for (const f of repo.files) {
    f.bytes = fs.readFileSync(f.source);
    f.sha256 = crypto.createHash('sha256').update(f.bytes).digest('hex');
    const header = Buffer.from('blob ' + f.bytes.length + '\0');
    f.git_oid = crypto.createHash('sha1').update(Buffer.concat([header, f.bytes])).digest('hex');
    if (f.corrupt) {
      f.served = Buffer.from(f.bytes);
      f.served[f.served.length >> 1] ^= 0x5a;
    } else {
      f.served = f.bytes;
    }
  }
}

function log(req) {
  fs.appendFileSync(logPath, JSON.stringify({
    method: req.method, url: req.url, range: req.headers.range || null,
    auth: req.headers.authorization || null,
  }) + '\n');
}

function json(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, {'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text)});
  res.end(text);
}

function authorized(repo, req) {
  return !repo.token || req.headers.authorization === 'Bearer ' + repo.token;
}

function sendFile(req, res, repoName, repo, f, extraHeaders) {
  const bytes = f.served;
  let start = 0;
  let status = 200;
  const m = /^bytes=(\d+)-$/.exec(req.headers.range || '');
  if (m) {
    start = Number(m[1]);
    if (start >= bytes.length) {
      res.writeHead(416, {'Content-Range': 'bytes */' + bytes.length});
      return res.end();
    }
    status = 206;
  }
  const headers = Object.assign({
    'Content-Length': bytes.length - start, 'Accept-Ranges': 'bytes',
    'Content-Type': 'application/octet-stream',
  }, extraHeaders);
  if (status === 206) headers['Content-Range'] = `bytes ${start}-${bytes.length - 1}/${bytes.length}`;
  res.writeHead(status, headers);
  if (req.method === 'HEAD') return res.end();
  const key = repoName + '/' + f.path;
  if (f.drop_after !== undefined && !dropped.has(key) && start < f.drop_after) {
    dropped.add(key);
    // Part of the body, then the connection is cut: the client sees a short transfer.
    res.write(bytes.subarray(start, f.drop_after), () => res.socket.destroy());
    return;
  }
  res.end(bytes.subarray(start));
}

const server = http.createServer((req, res) => {
  log(req);
  const url = new URL(req.url, 'http://x');
  const parts = url.pathname.split('/').slice(1).map(decodeURIComponent);
  let m;
  if (parts[0] === 'api' && parts[1] === 'models') {
    const repoName = parts[2] + '/' + parts[3];
    const repo = config.repos[repoName];
    if (!repo) return json(res, 404, {error: 'Repository not found'});
    if (!authorized(repo, req)) return json(res, 401, {error: 'Access to model ' + repoName + ' is restricted.'});
    const rev = parts.slice(5).join('/');
    if (rev !== 'main' && rev !== repo.commit) return json(res, 404, {error: 'Revision not found'});
    if (parts[4] === 'revision') {
      return json(res, 200, {id: repoName, sha: repo.commit,
                             siblings: repo.files.map((f) => ({rfilename: f.path}))});
    }
    if (parts[4] === 'tree') {
      return json(res, 200, repo.files.map((f) => {
        const e = {type: 'file', oid: f.git_oid, size: f.bytes.length, path: f.path};
        if (f.lfs) {
          e.oid = crypto.createHash('sha1').update(f.path).digest('hex');  // the pointer's oid
          e.size = f.bytes.length;
          e.lfs = {oid: f.sha256, size: f.bytes.length, pointerSize: 134};
        }
        return e;
      }));
    }
    return json(res, 404, {error: 'not found'});
  }
  if (parts[0] === 'cdn') {
    const repoName = parts[1] + '/' + parts[2];
    const repo = config.repos[repoName];
    const f = repo && repo.files.find((x) => x.path === parts.slice(3).join('/'));
    if (!f) return json(res, 404, {error: 'Entry not found'});
    return sendFile(req, res, repoName, repo, f, {ETag: '"' + f.sha256 + '"'});
  }
  if (parts.length >= 5 && parts[2] === 'resolve') {
    const repoName = parts[0] + '/' + parts[1];
    const repo = config.repos[repoName];
    if (!repo) return json(res, 404, {error: 'Repository not found'});
    if (!authorized(repo, req)) return json(res, 401, {error: 'Access restricted'});
    if (parts[3] !== 'main' && parts[3] !== repo.commit) return json(res, 404, {error: 'Revision not found'});
    const path = parts.slice(4).join('/');
    const f = repo.files.find((x) => x.path === path);
    if (!f) return json(res, 404, {error: 'Entry not found'});
    const common = {'X-Repo-Commit': repo.commit};
    if (f.lfs) {
      res.writeHead(302, Object.assign({
        // Another host name for the same server, as the Hub's CDN is another host: the
        // client must not send the token there.
        Location: 'http://localhost:' + server.address().port + '/cdn/' + repoName + '/' + path, 'X-Linked-Etag': '"' + f.sha256 + '"',
        'X-Linked-Size': f.bytes.length, 'Content-Length': 0,
      }, common));
      return res.end();
    }
    return sendFile(req, res, repoName, repo, f, Object.assign({ETag: '"' + f.git_oid + '"'}, common));
  }
  json(res, 404, {error: 'not found'});
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write('PORT ' + server.address().port + '\n');
});
process.on('SIGTERM', () => process.exit(0));
