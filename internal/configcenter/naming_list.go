package configcenter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// instanceLister reads a service's instance list from the Nacos open API
// (GET /nacos/v1/ns/instance/list), trying each server in turn.
//
// The SDK's own copy of the list is not used: nacos-sdk-go v2.3.5 updates
// it from two goroutines (a subscription's first answer and server pushes)
// that sort the same slice in place, so reading it, even from the
// subscription callback, is a data race inside the SDK.
type instanceLister struct {
	addrs                 []string
	namespace, group, svc string
	username, password    string
	client                *http.Client
	next                  int    // server to try first
	token                 string // access token when auth is on
}

func newInstanceLister(o NamingOptions) *instanceLister {
	return &instanceLister{
		addrs: o.Addrs, namespace: o.Namespace, group: o.Group, svc: o.Service,
		username: o.Username, password: o.Password,
		client: &http.Client{Timeout: time.Duration(DefaultNacosTimeoutMs) * time.Millisecond},
	}
}

// healthy returns the number of healthy, enabled instances with a positive
// weight, from the first server that answers.
func (l *instanceLister) healthy(ctx context.Context) (int, error) {
	var errs []error
	for i := 0; i < len(l.addrs); i++ {
		k := (l.next + i) % len(l.addrs)
		n, err := l.healthyFrom(ctx, strings.TrimSpace(l.addrs[k]))
		if err == nil {
			l.next = k
			return n, nil
		}
		errs = append(errs, err)
	}
	return 0, errors.Join(errs...)
}

func (l *instanceLister) healthyFrom(ctx context.Context, addr string) (int, error) {
	if l.username != "" && l.token == "" {
		if err := l.login(ctx, addr); err != nil {
			return 0, err
		}
	}
	q := url.Values{"serviceName": {l.svc}, "groupName": {l.group}, "healthyOnly": {"true"}}
	if l.namespace != "" {
		q.Set("namespaceId", l.namespace)
	}
	if l.token != "" {
		q.Set("accessToken", l.token)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/nacos/v1/ns/instance/list?"+q.Encode(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		l.token = "" // expired: log in again next time
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: instance list answered %d", addr, resp.StatusCode)
	}
	var body struct {
		Hosts []struct {
			Healthy bool    `json:"healthy"`
			Enabled bool    `json:"enabled"`
			Weight  float64 `json:"weight"`
		} `json:"hosts"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&body); err != nil {
		return 0, fmt.Errorf("%s: instance list: %w", addr, err)
	}
	n := 0
	for _, h := range body.Hosts {
		if h.Healthy && h.Enabled && h.Weight > 0 {
			n++
		}
	}
	return n, nil
}

func (l *instanceLister) login(ctx context.Context, addr string) error {
	form := url.Values{"username": {l.username}, "password": {l.password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/nacos/v1/auth/login", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := l.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: login: %w", addr, err)
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"accessToken"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body) != nil || body.AccessToken == "" {
		return fmt.Errorf("%s: login answered %d", addr, resp.StatusCode)
	}
	l.token = body.AccessToken
	return nil
}
