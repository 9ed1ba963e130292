"""The admission webhook: Karpenter's defaulting and validation of Provisioners, validation of Karpenter v1
NodePools and EC2NodeClasses, and pod pinning, over HTTPS.

It runs the very functions the CLI runs (`checks.validation.policies.check_document`,
`checks.proof.provisioners.check_provisioner`, `api.defaults.default_provisioner`), so an object the webhook admits
is one `karpenter-policy check` accepts. It imports the checking engine (`checks`), never the commands.

Modules, one job each:

* `review`      — the AdmissionReview (admission.k8s.io/v1) wire format: parse a request, write a response.
* `jsondoc`     — a request's object as a loader `Document` (positions are ranks in document order), and the
  field path of a position.
* `solvercache` — a `Solver` that remembers its verdicts (the solver takes milliseconds, a lookup microseconds).
* `workcaps`    — what one Provisioner (or v1 NodePool, EC2NodeClass) in a review may hold before any check
  runs (caps on a worker's work).
* `checks`      — the CLI's checks on one object, as denial lines and warnings; whole results cached.
* `context`     — what `--policies DIR` or `--constraints DIR` tell the webhook (node OS, taints, pinning rules).
* `reload`      — that context and the pinning rules, reloaded when their files change (workers replaced).
* `watch`       — noticing changed files: a content fingerprint and a polling thread (certificate, context).
* `pinning`     — the `Pinner` interface of `/mutate/pods`, implemented on the CLI's pinning rules.
* `handlers`    — `/mutate/provisioners`, `/validate/provisioners`, `/validate/nodepools`,
  `/validate/ec2nodeclasses`, `/mutate/pods`: a request in, a response out.
* `metrics`     — Prometheus counters and latency histograms.
* `certs`       — `--self-signed DIR`: a CA and a serving certificate (cryptography).
* `tls`         — the server's SSL context, reloaded when the certificate files change on disk.
* `workers`     — the checks in worker processes, each request under a deadline (a stuck worker is replaced).
* `server`      — the HTTPS server: routing, size and time limits, connection management, drain, plain HTTP
  on the TLS port.
* `command`     — `karpenter-policy webhook`: options in, a running server out.

deploy/webhook/README.md is the user's documentation; docs/hardening-webhook.md what the server bounds.
"""
