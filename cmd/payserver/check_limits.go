package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"payserver/internal/configcenter"
	"payserver/internal/ratelimit"
)

// checkLimits validates a limits document offline and prints what payserver
// would enforce. Ops run it before publishing to Nacos. Exit 0 when valid,
// 1 when refused, 2 on usage errors.
func checkLimits(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: payserver check-limits FILE   (FILE - reads standard input)")
		return 2
	}
	var data []byte
	var err error
	if args[0] == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(args[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "check-limits: %v\n", err)
		return 2
	}
	cfg, err := ratelimit.ParseDocument(data)
	if err != nil {
		fmt.Fprintf(stderr, "INVALID: %v\npayserver would refuse this document and keep the limits in force.\n", err)
		return 1
	}
	printLimits(stdout, cfg, time.Now())
	return 0
}

// printLimits writes what payserver would enforce: each key's base rule,
// then each schedule with whether it is past, active or upcoming at now.
func printLimits(stdout io.Writer, cfg *ratelimit.Config, now time.Time) {
	keys := make([]ratelimit.Key, 0, len(cfg.Rules))
	for k := range cfg.Rules {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	fmt.Fprintf(stdout, "OK: %d keys, default window %s, zone %s, global shadow %v\n", len(keys), configcenter.FormatWindow(cfg.DefaultWindow), cfg.Zone, cfg.Shadow)
	for _, k := range keys {
		r := cfg.Rules[k]
		if cfg.Shadow {
			r.Shadow = true
		}
		fmt.Fprintf(stdout, "  %-40s %s\n", k.String(), configcenter.DescribeRule(r, true))
	}
	if len(cfg.Schedules) > 0 {
		fmt.Fprintf(stdout, "Schedules (%d), each replacing its key's rule from FROM to TO (exclusive):\n", len(cfg.Schedules))
		for _, s := range cfg.Schedules {
			state := s.StateAt(now)
			switch state {
			case ratelimit.ScheduleActive:
				state = "ACTIVE now"
			case ratelimit.SchedulePast:
				state = "past, ignored"
			}
			fmt.Fprintf(stdout, "  %-40s %s .. %s  %s  (%s)\n", s.Key.String(), s.From.Format(time.RFC3339), s.To.Format(time.RFC3339),
				configcenter.DescribeRule(s.Rule, true), state)
		}
	}
	fmt.Fprintln(stdout, "Keys not listed are unlimited.")
	bizTypes := make([]string, 0, len(cfg.Routes))
	for biz := range cfg.Routes {
		bizTypes = append(bizTypes, biz)
	}
	sort.Strings(bizTypes)
	for _, biz := range bizTypes {
		fmt.Fprintf(stdout, "  route %-34s %s\n", biz, configcenter.DescribeRoute(cfg.Routes[biz]))
	}
	if len(bizTypes) > 0 {
		fmt.Fprintln(stdout, "A server refuses routes that name a channel it is not configured with.")
	}
}
