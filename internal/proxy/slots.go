package proxy

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/engine"
)

// release gives back the in-flight slots an admitted request's checks hold,
// once the request has ended; a failure is logged, and those slots return
// when their lease ends.
func (h *handler) release(r *http.Request, checks []engine.Check) {
	ctx := context.WithoutCancel(r.Context()) // the client may be gone: release anyway
	for i := range checks {
		c := &checks[i]
		if c.Token == "" {
			continue
		}
		if _, err := h.svc.Release(ctx, c.Policy, c.Key, c.Plan, c.Token); err != nil {
			h.log.WarnContext(ctx, "proxy: releasing an in-flight slot failed; it returns when its lease ends", "policy", c.Policy.Name, "err", err)
		}
	}
}

// refuseSlots reports a route limited by a concurrency policy: forward-auth
// cannot tell when the gateway's request ends, so it could never give the
// slot back; nor does it see the upstream's response, so it cannot charge
// from it either.
func refuseSlots(rs *routes) error {
	for _, rt := range rs.list {
		for _, l := range rt.limits {
			if l.chargeHeader != "" {
				return fmt.Errorf("proxy: route %q: policy %q has charge_header %s, which forward-auth cannot serve: "+
					"it never sees the upstream's response; use sluice proxy --upstream, or the HTTP API's /v1/charge", rt.prefix, l.policy.Name, l.chargeHeader)
			}
			if l.policy.Algorithm == sluice.Concurrency {
				return fmt.Errorf("proxy: route %q: policy %q is a concurrency limit, which forward-auth cannot serve: "+
					"it answers before the gateway's request starts and never learns when it ends, so the slot could not be released; "+
					"use sluice proxy --upstream, or the HTTP API's /v1/check and /v1/release", rt.prefix, l.policy.Name)
			}
		}
	}
	return nil
}
