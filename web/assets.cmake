# The web chat page's files: URL path, then the file under web/. The page's own files live
# here; the libraries come from web/node_modules, installed by `npm ci` from
# web/package-lock.json (scripts/install-deps.sh), never copied into the tree.
set(LOOM_WEBUI_ASSETS
  "/"                                    "index.html"
  "/webui/app.js"                        "app.js"
  "/webui/style.css"                     "style.css"
  "/webui/lib/marked.min.js"             "node_modules/marked/marked.min.js"
  "/webui/lib/purify.min.js"             "node_modules/dompurify/dist/purify.min.js"
  "/webui/lib/highlight.min.js"          "node_modules/@highlightjs/cdn-assets/highlight.min.js"
  "/webui/lib/highlight-light.min.css"   "node_modules/@highlightjs/cdn-assets/styles/github.min.css"
  "/webui/lib/highlight-dark.min.css"    "node_modules/@highlightjs/cdn-assets/styles/github-dark.min.css"
)
