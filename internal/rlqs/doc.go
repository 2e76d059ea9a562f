// Package rlqs is Sluice's rate limit quota service (RLQS) for Envoy's
// rate_limit_quota HTTP filter: a gRPC server of
// envoy.service.rate_limit_quota.v3.RateLimitQuotaService. Where the rate
// limit service (package envoyrls) decides each request, RLQS hands each
// Envoy a quota to enforce itself — a fair share of each limit — and moves
// the shares as the Envoys' demands move.
//
// # The protocol, as Sluice follows it
//
// An Envoy opens one stream per domain; its first message names the domain
// (later messages' domains are ignored). Each message reports, per bucket,
// the requests allowed and denied over time_elapsed. The first report of a
// bucket subscribes the stream to it; every report is answered with a
// QuotaAssignmentAction per bucket, and when one Envoy's report moves the
// others' shares (beyond a tolerance of 0.5%), their new assignments are
// pushed to them at once. An assignment lives TTLIntervals report intervals
// (at least MinTTL; FirstTTL for a subscription's first report, whose
// interval is unknown yet). A bucket not reported for its assignment's time
// to live is abandoned: its Envoy gets an AbandonAction (Sweep) and its
// share is freed. A closed stream frees its shares at once.
//
// # Buckets and limits
//
// A bucket id of exactly the entries policy and key (and optionally plan)
// is the native policy's key, as the HTTP API's {"policy", "key", "plan"}.
// Any other bucket id is matched against the stream's domain as an
// envoyproxy/ratelimit descriptor: its entries, which are unordered, are
// put in the order the domain's tree asks for them (orderEntries), and the
// store key is the one ShouldRateLimit would use (envoyrls.StoreKey). Every
// Envoy on one (policy, key) shares that limit, whichever bucket id led it
// there. The policy applied is the engine's: a runtime override of the key,
// else its plan's limit, else its own. Several limits on one bucket: the
// tightest share is assigned. A bucket that matches no limit, or only
// shadow or quota-mode ones, is ALLOW_ALL; a limit of 0 (a ban) DENY_ALL.
//
// # Fair shares
//
// An Envoy's demand is (allowed + denied) / time_elapsed: what it was
// offered, whatever it was allowed. Each limit is divided among every
// Envoy reporting on it by weighted max-min fairness (package fairshare),
// the demands left over spread evenly, so the assignments sum to the limit
// (rounded down to whole requests). The demands are shared by every node
// through a Board, so Envoys on different nodes are divided as one.
//
// # Bad input
//
// Nothing a client sends gets it more than its share of a limit. A bucket
// id naming no policy, too large (MaxEntries, MaxIDBytes) or over the
// stream's cap of buckets (WithMaxBuckets) is answered DENY_ALL and not
// tracked. A report with a count over MaxCount or a time_elapsed negative,
// invalid or over WithMaxElapsed is refused: its counts are ignored, the
// bucket is still answered. A report over less than MinElapsed is read over
// MinElapsed. A stream without a domain is closed (INVALID_ARGUMENT), one
// that sends nothing within WithFirstReportTimeout too (DEADLINE_EXCEEDED),
// and one past WithMaxStreams is refused (RESOURCE_EXHAUSTED). Each is
// counted in sluice_rlqs_refused_total by reason.
package rlqs
