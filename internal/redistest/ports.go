package redistest

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// busOffset is where Redis Cluster puts the cluster bus: port+10000.
const busOffset = 10000

// ports remembers the ports (and cluster bus ports) handed out in this test
// binary, so that parallel tests never pick each other's ports between the
// probe and redis-server's bind.
var ports struct {
	sync.Mutex
	used map[int]bool
}

// Ports are picked from [portLow, portHigh): below Linux's ephemeral range
// (32768 and up by default), so that no client socket of this or another
// process can hold one between the probe and redis-server's bind. A client
// dialing a port that is down, such as a store waiting for its Redis to
// start, gets an ephemeral source port — and were that the port it dials,
// TCP would connect it to itself and keep the port from Redis. The range
// also leaves room for the cluster bus ports (port+busOffset) below the
// ephemeral range.
const (
	portLow  = 12000
	portHigh = 32768 - busOffset
)

// reservePort picks a free loopback port below the ephemeral range by
// binding it and closing. For a cluster node the bus port (port+busOffset)
// must be free too.
func reservePort(cluster bool) (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.used == nil {
		ports.used = make(map[int]bool)
	}
	for range 500 {
		p := portLow + rand.IntN(portHigh-portLow)
		if ports.used[p] || ports.used[p+busOffset] {
			continue
		}
		if _, err := probePort(p); err != nil {
			continue
		}
		if cluster {
			if _, err := probePort(p + busOffset); err != nil {
				continue
			}
			ports.used[p+busOffset] = true
		}
		ports.used[p] = true
		return p, nil
	}
	return 0, errors.New("no free port (pair) found on 127.0.0.1")
}

// probePort binds 127.0.0.1:port (0 = any) and closes it, returning the port.
func probePort(port int) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0, err
	}
	p := l.Addr().(*net.TCPAddr).Port
	return p, l.Close()
}

func releasePort(p int, cluster bool) {
	ports.Lock()
	defer ports.Unlock()
	delete(ports.used, p)
	if cluster {
		delete(ports.used, p+busOffset)
	}
}
