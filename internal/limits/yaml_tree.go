package limits

import (
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// errNotAMap is a document whose top level is not a mapping.
var errNotAMap = errors.New("limits document is not valid: its top level must be a map (window, zone, shadow, limits, schedules, or BIZTYPE:CHANNEL keys)")

// yamlRoot reads data's top-level mapping into plain Go values, as
// yaml.v3's Unmarshal into a map[string]any does: nested maps whose keys
// are all strings as map[string]any (else map[any]any, which the parsers
// refuse), slices, scalars as yaml.v3 resolves them, merge keys ("<<")
// merged with the explicit keys winning. It takes time linear in the
// document: decoding into a map, yaml.v3 checks each mapping key against
// every key before it, 0.7 s of CPU for a document of 10,000 keys (make
// bench-scale, "keys"). A key repeated in a mapping is an error that names
// both lines; aliases may expand the document to at most a million values,
// or 64 per byte of a larger one. An empty document gives a nil map.
func yamlRoot(data []byte) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("limits document is not valid YAML or JSON: %w", err)
	}
	n := &doc
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil, nil
		}
		n = n.Content[0]
	}
	if n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, errNotAMap
	}
	budget := max(1_000_000, 64*len(data))
	v, err := plainValue(n, 0, &budget)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// maxDepth bounds the nesting of a document.
const maxDepth = 64

// plainValue is n as a plain Go value; depth is how deep n is nested, and
// budget how many more values may be made.
func plainValue(n *yaml.Node, depth int, budget *int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("limits document is not valid: line %d: nested more than %d deep", n.Line, maxDepth)
	}
	if *budget--; *budget < 0 {
		return nil, errors.New("limits document is not valid: its aliases expand to too many values (a million, or 64 per byte of the document)")
	}
	switch n.Kind {
	case yaml.AliasNode:
		return plainValue(n.Alias, depth+1, budget)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := plainValue(c, depth+1, budget)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		return plainMapping(n, depth, budget)
	case yaml.ScalarNode:
		if n.Tag == "!!str" {
			return n.Value, nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("limits document is not valid: line %d: %w", n.Line, err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("limits document is not valid: line %d: unexpected YAML node", n.Line)
}

// plainMapping is mapping n as a plain Go value (see yamlRoot).
func plainMapping(n *yaml.Node, depth int, budget *int) (any, error) {
	out := make(map[string]any, len(n.Content)/2)
	var other map[any]any // keys that are not all strings
	lines := make(map[string]int, len(n.Content)/2)
	var merged []any
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		for k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("limits document is not valid: line %d: a key must be a plain value, not a map or a list", k.Line)
		}
		val, err := plainValue(v, depth+1, budget)
		if err != nil {
			return nil, err
		}
		if k.Tag == "!!merge" {
			merged = append(merged, val)
			continue
		}
		if first, seen := lines[k.Value]; seen {
			return nil, fmt.Errorf("limits document is not valid: line %d: key %q is repeated (first at line %d)", k.Line, k.Value, first)
		}
		lines[k.Value] = k.Line
		if k.Tag != "!!str" && other == nil && depth > 0 {
			other = make(map[any]any, len(n.Content)/2)
			for s, x := range out {
				other[s] = x
			}
		}
		if other != nil {
			var key any
			if err := k.Decode(&key); err != nil {
				return nil, fmt.Errorf("limits document is not valid: line %d: %w", k.Line, err)
			}
			other[key] = val
			continue
		}
		out[k.Value] = val
	}
	// Merged maps fill the keys the mapping does not set itself; of a list
	// of them, the first that sets a key wins.
	for _, m := range merged {
		sources := []any{m}
		if list, ok := m.([]any); ok {
			sources = list
		}
		for _, src := range sources {
			sm, ok := src.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("limits document is not valid: line %d: a merge key (<<) takes a map or a list of maps", n.Line)
			}
			for key, x := range sm {
				if _, set := lines[key]; set {
					continue
				}
				lines[key] = n.Line
				if other != nil {
					other[key] = x
				} else {
					out[key] = x
				}
			}
		}
	}
	if other != nil {
		return other, nil
	}
	return out, nil
}
