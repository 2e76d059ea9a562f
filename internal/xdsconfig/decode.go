package xdsconfig

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of ratelimit.config.ratelimit.v3's messages (rls_conf.proto).
const (
	configName, configDomain, configDescriptors = 1, 2, 3

	descKey, descValue, descRateLimit, descDescriptors = 1, 2, 3, 4
	descShadowMode, descDetailedMetric, descQuotaMode  = 5, 6, 7 // 8, metadata, is not read

	limitUnit, limitRequestsPerUnit, limitUnlimited, limitName, limitReplaces = 1, 2, 3, 4, 5

	replaceName = 1
)

// What the decoded form costs, counted as it is decoded: a node, a slot of a
// mapping's or list's contents, and each string's bytes.
const (
	nodeCost = int64(unsafe.Sizeof(yaml.Node{}))
	slotCost = int64(unsafe.Sizeof((*yaml.Node)(nil)))
)

// decoder reads RateLimitConfig resources from their wire form straight
// into the YAML documents the configuration parser reads, as the proto
// library would decode them (the last of a repeated field wins, a message
// field given twice is merged, fields of unknown numbers or wire types are
// skipped, strings must be UTF-8), but reading only the fields Sluice uses:
// a descriptor's metadata, which a server may fill with anything, is skipped
// unread.
//
// It counts descriptors, their depth and the bytes of the form as it goes.
// Past a bound it builds nothing more, and only counts to the end, so that a
// huge version is refused early and for the cost of reading it, with the
// value it reached.
type decoder struct {
	lim   Limits
	build bool        // false once a bound is passed: count only
	free  []yaml.Node // the block nodes are taken from

	descriptors int
	bytes       int64
	tooDeep     bool
}

func newDecoder(lim Limits) *decoder { return &decoder{lim: lim.withDefaults(), build: true} }

// charge counts what a part of the form costs.
func (d *decoder) charge(nodes, slots int, text int) {
	d.bytes += int64(nodes)*nodeCost + int64(slots)*slotCost + int64(text)
	if d.bytes > d.lim.Bytes {
		d.build = false
	}
}

// err is the bounds the version went past, naming each with the value
// reached; nil within them.
func (d *decoder) err() error {
	var errs []error
	if d.descriptors > d.lim.Descriptors {
		errs = append(errs, fmt.Errorf("the version has %d descriptors, over the bound of %d (--max-descriptors)",
			d.descriptors, d.lim.Descriptors))
	}
	if d.tooDeep {
		errs = append(errs, fmt.Errorf("the version's descriptors nest deeper than %d levels, the bound (--max-descriptor-depth)",
			d.lim.Depth))
	}
	if d.bytes > d.lim.Bytes {
		errs = append(errs, fmt.Errorf("the version takes %d bytes decoded, over the bound of %d (--xds-max-bytes)",
			d.bytes, d.lim.Bytes))
	}
	return errors.Join(errs...)
}

// field is one field of a message on the wire: its number and type, and
// its value, a varint or the bytes of a length-delimited field.
type field struct {
	num    protowire.Number
	typ    protowire.Type
	varint uint64
	bytes  []byte
}

// next reads the field at the start of b and returns it with what follows.
// A field of a type other than varint or length-delimited is skipped, its
// typ left as read.
func next(b []byte) (f field, rest []byte, err error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return f, nil, protowire.ParseError(n)
	}
	b = b[n:]
	f.num, f.typ = num, typ
	switch typ {
	case protowire.VarintType:
		f.varint, n = protowire.ConsumeVarint(b)
	case protowire.BytesType:
		f.bytes, n = protowire.ConsumeBytes(b)
	default:
		n = protowire.ConsumeFieldValue(num, typ, b)
	}
	if n < 0 {
		return f, nil, protowire.ParseError(n)
	}
	return f, b[n:], nil
}

// is reports whether f is field num of wire type typ; the proto library
// keeps a field of a known number but another type as an unknown field, so
// it is skipped likewise.
func (f field) is(num protowire.Number, typ protowire.Type) bool { return f.num == num && f.typ == typ }

// text returns f's bytes as a string, which must be UTF-8 as proto3 strings
// are, and charges them. Counting only, it checks them and returns "".
func (d *decoder) text(f field, what string) (string, error) {
	if !utf8.Valid(f.bytes) {
		return "", fmt.Errorf("%s is not valid UTF-8", what)
	}
	if d.charge(1, 0, len(f.bytes)); !d.build {
		return "", nil
	}
	return string(f.bytes), nil
}

// config reads one RateLimitConfig into the envoyproxy/ratelimit file it
// stands for, and returns its name. proto3 cannot tell a zero from an unset
// field, so zeros are left out of the file (but see rateLimitNode).
func (d *decoder) config(b []byte) (doc *yaml.Node, name string, err error) {
	var domain string
	var descriptors []*yaml.Node
	listed := false
	d.charge(1, 4, 0) // the document's mapping
	for len(b) > 0 {
		var f field
		if f, b, err = next(b); err != nil {
			return nil, "", err
		}
		switch {
		case f.is(configName, protowire.BytesType):
			if name, err = d.text(f, "the name"); err != nil {
				return nil, "", err
			}
		case f.is(configDomain, protowire.BytesType):
			if domain, err = d.text(f, "the domain"); err != nil {
				return nil, "", err
			}
		case f.is(configDescriptors, protowire.BytesType):
			if !listed {
				listed = true
				d.charge(1, 0, 0) // the list
			}
			d.charge(0, 1, 0)
			n, err := d.descriptor(f.bytes, 1)
			if err != nil {
				return nil, "", err
			}
			if d.build {
				descriptors = append(descriptors, n)
			}
		}
	}
	if !d.build {
		return nil, name, nil
	}
	m := d.mapping(2)
	d.addStr(m, keyDomain, domain)
	if len(descriptors) > 0 {
		add(m, keyDescriptors, d.list(descriptors))
	}
	return m, name, nil
}

// rateLimit is a RateLimitPolicy as read so far: a message field given
// twice is merged, later fields over earlier ones.
type rateLimit struct {
	unit            int32
	requestsPerUnit uint32
	unlimited       bool
	name            string
	replaces        []string
	listed          bool // replaces were seen, and their list charged
}

// descriptor reads one RateLimitDescriptor at depth (1 at the top).
func (d *decoder) descriptor(b []byte, depth int) (*yaml.Node, error) {
	if d.descriptors++; d.descriptors > d.lim.Descriptors {
		d.build = false
	}
	if depth > d.lim.Depth {
		d.tooDeep, d.build = true, false
		return nil, nil // not read further: the version is refused
	}
	d.charge(1, 14, 0) // the descriptor's mapping
	var key, value string
	var rl rateLimit
	hasLimit := false
	var children []*yaml.Node
	var shadow, detailed, quota, listed bool
	for len(b) > 0 {
		f, rest, err := next(b)
		if err != nil {
			return nil, err
		}
		b = rest
		switch {
		case f.is(descKey, protowire.BytesType):
			if key, err = d.text(f, "a descriptor key"); err != nil {
				return nil, err
			}
		case f.is(descValue, protowire.BytesType):
			if value, err = d.text(f, "a descriptor value"); err != nil {
				return nil, err
			}
		case f.is(descRateLimit, protowire.BytesType):
			if !hasLimit {
				hasLimit = true
				d.charge(2, 10, 0) // its mapping and requests_per_unit
			}
			if err := d.rateLimit(&rl, f.bytes); err != nil {
				return nil, err
			}
		case f.is(descDescriptors, protowire.BytesType):
			if !listed {
				listed = true
				d.charge(1, 0, 0) // the list
			}
			d.charge(0, 1, 0)
			n, err := d.descriptor(f.bytes, depth+1)
			if err != nil {
				return nil, err
			}
			if d.build {
				children = append(children, n)
			}
		case f.is(descShadowMode, protowire.VarintType):
			shadow = f.varint != 0
		case f.is(descDetailedMetric, protowire.VarintType):
			detailed = f.varint != 0
		case f.is(descQuotaMode, protowire.VarintType):
			quota = f.varint != 0
		}
	}
	if !d.build {
		return nil, nil
	}
	m := d.mapping(7)
	d.addStr(m, keyKey, key)
	if value != "" {
		d.addStr(m, keyValue, value)
	}
	if hasLimit {
		add(m, keyRateLimit, d.rateLimitNode(&rl))
	}
	if len(children) > 0 {
		add(m, keyDescriptors, d.list(children))
	}
	addTrue(m, keyShadowMode, shadow)
	addTrue(m, keyDetailedMetric, detailed)
	addTrue(m, keyQuotaMode, quota)
	return m, nil
}

// rateLimit reads one occurrence of a RateLimitPolicy into rl.
func (d *decoder) rateLimit(rl *rateLimit, b []byte) error {
	for len(b) > 0 {
		f, rest, err := next(b)
		if err != nil {
			return err
		}
		b = rest
		switch {
		case f.is(limitUnit, protowire.VarintType):
			rl.unit = int32(f.varint) // an enum is an int32, truncated as the proto library does
		case f.is(limitRequestsPerUnit, protowire.VarintType):
			rl.requestsPerUnit = uint32(f.varint)
		case f.is(limitUnlimited, protowire.VarintType):
			rl.unlimited = f.varint != 0
		case f.is(limitName, protowire.BytesType):
			if rl.name, err = d.text(f, "a rate_limit name"); err != nil {
				return err
			}
		case f.is(limitReplaces, protowire.BytesType):
			name, err := d.replace(f.bytes)
			if err != nil {
				return err
			}
			if !rl.listed {
				rl.listed = true
				d.charge(1, 0, 0) // the list
			}
			d.charge(1, 3, 0) // its {name: …}: a mapping, and a slot in the list; the name is charged
			if d.build {
				rl.replaces = append(rl.replaces, name)
			}
		}
	}
	return nil
}

// replace reads a RateLimitReplace: its name.
func (d *decoder) replace(b []byte) (name string, err error) {
	for len(b) > 0 {
		var f field
		if f, b, err = next(b); err != nil {
			return "", err
		}
		if f.is(replaceName, protowire.BytesType) {
			if name, err = d.text(f, "a replaces name"); err != nil {
				return "", err
			}
		}
	}
	return name, nil
}

// rateLimitNode is rl's rate_limit mapping. proto3 cannot tell a zero from
// an unset field, so zeros are left out, except requests_per_unit on a
// limited rate_limit: 0 there bans the value, as in ratelimit.
func (d *decoder) rateLimitNode(rl *rateLimit) *yaml.Node {
	m := d.mapping(5)
	addTrue(m, keyUnlimited, rl.unlimited)
	if rl.unit != 0 {
		unit := unitNodes[rl.unit]
		if unit == nil { // a unit no version of ratelimit knows: the parser names it
			unit = d.scalar("!!str", strconv.Itoa(int(rl.unit)))
		}
		add(m, keyUnit, unit)
	}
	if !rl.unlimited || rl.requestsPerUnit != 0 {
		add(m, keyRequestsPerUnit, d.scalar("!!int", strconv.FormatUint(uint64(rl.requestsPerUnit), 10)))
	}
	if rl.name != "" {
		d.addStr(m, keyName, rl.name)
	}
	if len(rl.replaces) > 0 {
		items := make([]*yaml.Node, len(rl.replaces))
		for i, r := range rl.replaces {
			items[i] = d.mapping(1)
			d.addStr(items[i], keyName, r)
		}
		add(m, keyReplaces, d.list(items))
	}
	return m
}
