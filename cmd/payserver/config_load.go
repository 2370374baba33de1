package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	koanfyaml "github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"

	"payserver/internal/ratelimit"
)

// LoadConfig decodes the settings once into a Config: the defaults, then the
// YAML file (PAYSERVER_CONFIG, else configs/payserver.yaml when present),
// then the PAYSERVER_* variables of environ (KEY=value, as os.Environ), then
// Validate.
//
// An unknown YAML key is an error: the file is written and reviewed on
// purpose, and a misspelt key would silently leave a default in force. An
// unknown PAYSERVER_* variable is listed in Config.UnknownEnv (Run warns
// about each) rather than refused: environments are shared and injected
// (orchestrators, test scripts, a rollback to a binary older than the
// variable), and a start refused for a variable it does not read would be an
// outage. A variable that was moved (movedVariables) is refused, naming
// what sets its setting now: ignoring it would change what payserver does.
// Variables under PAYSERVER_TEST_ and PAYSERVER_IT_, and
// PAYSERVER_SERVICES_DIR, belong to the test tooling and are not reported.
func LoadConfig(environ []string) (Config, error) {
	vars := envMap(environ)
	k := koanf.New(".")
	path, explicit := vars["PAYSERVER_CONFIG"], true
	if path == "" {
		path, explicit = "configs/payserver.yaml", false
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := k.Load(rawbytes.Provider(data), koanfyaml.Parser()); err != nil {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
	case explicit || !errors.Is(err, os.ErrNotExist):
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	if err := refuseRemovedKeys(k.Exists); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	if err := refuseMovedVariables(vars); err != nil {
		return Config{}, fmt.Errorf("environment: %w", err)
	}
	var unknown []string
	if err := k.Load(env.Provider(".", env.Opt{
		Prefix:        "PAYSERVER_",
		EnvironFunc:   func() []string { return environ },
		TransformFunc: envTransform(&unknown),
	}), nil); err != nil {
		return Config{}, err
	}
	// The built keys are taken out before the decoding: LoadConfig builds
	// them below.
	// A list in the file is the variable's comma list; a setting is named
	// in errors as it was given: by its variable, or by its key in the
	// file.
	built, label := map[string]string{}, map[string]string{}
	for name, key := range envKeys {
		if !slices.Contains(builtKeys, key) || !k.Exists(key) {
			continue
		}
		built[name] = strings.TrimSpace(k.String(key))
		if list := k.Strings(key); len(list) > 0 {
			if _, isString := k.Get(key).(string); !isString {
				built[name] = strings.Join(list, ",")
			}
		}
		label[name] = name
		if _, fromEnv := vars[name]; !fromEnv {
			label[name] = key + " in " + path
		}
	}
	// A list, or one comma list as the variable takes it.
	channels := k.Strings("channelCodes")
	if s, ok := k.Get("channelCodes").(string); ok {
		channels = splitList(s)
	}
	for _, key := range builtKeys {
		k.Delete(key)
	}
	cfg := DefaultConfig()
	if err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{DecoderConfig: &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			durationNeedsUnitHook,
			mapstructure.StringToTimeDurationHookFunc(),
			policyHook,
			mapstructure.TextUnmarshallerHookFunc()),
		WeaklyTypedInput: true,
		ErrorUnused:      true,
		TagName:          "yaml",
		Result:           &cfg,
	}}); err != nil {
		return Config{}, fmt.Errorf("config %s and environment: %s", path, nameEnvInError(err.Error(), vars))
	}
	if len(channels) > 0 {
		chs := map[string]ChannelConfig{}
		for _, code := range channels {
			chs[code] = cfg.Channels[code]
		}
		cfg.Channels = chs
	}
	if cfg.API, err = loadAPIConfig(func(name string) string { return built[name] }, func(name string) string { return cmp.Or(label[name], name) }, cfg.AdminToken, cfg.Clients); err != nil {
		return Config{}, err
	}
	sort.Strings(unknown)
	cfg.UnknownEnv = unknown
	return cfg, cfg.Validate()
}

// durationNeedsUnitHook refuses a bare number where a duration is expected
// (YAML `timeout: 50`): with weakly typed input it would otherwise be read
// as nanoseconds.
func durationNeedsUnitHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[time.Duration]() {
		return data, nil
	}
	switch from.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return nil, fmt.Errorf("%v is not a duration: give a unit, such as 50ms, 5s or 1m", data)
	}
	return data, nil
}

// policyHook decodes a string into a ratelimit.Policy through
// ratelimit.ParsePolicy, so a bad policy is refused while decoding.
func policyHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[ratelimit.Policy]() || from.Kind() != reflect.String {
		return data, nil
	}
	return ratelimit.ParsePolicy(reflect.ValueOf(data).String())
}

// envTransform maps each PAYSERVER_* variable to its key (envKeys), drops
// empty values (empty means unset, as it always did) and the variables
// handled outside the decoding, and collects unknown names into unknown.
func envTransform(unknown *[]string) func(k, v string) (string, any) {
	return func(name, v string) (string, any) {
		key, known := envKeys[name]
		switch {
		case !known:
			if !testToolingVar(name) {
				*unknown = append(*unknown, name)
			}
			return "", nil
		case key == "" || v == "":
			return "", nil
		case envLists[key]:
			return key, splitList(v)
		}
		return key, v
	}
}

func testToolingVar(name string) bool {
	return strings.HasPrefix(name, "PAYSERVER_TEST_") || strings.HasPrefix(name, "PAYSERVER_IT_") ||
		name == "PAYSERVER_SERVICES_DIR"
}

// nameEnvInError makes the decoder's message one line, calls its "invalid
// keys" unknown, and adds the variable's name after each key path it
// complains about, when that variable was set.
func nameEnvInError(msg string, vars map[string]string) string {
	msg = strings.TrimPrefix(msg, "decoding failed due to the following error(s):")
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", " ; ")), " ")
	msg = strings.TrimPrefix(strings.ReplaceAll(msg, "; ;", ";"), "; ")
	msg = strings.ReplaceAll(msg, "'' has invalid keys:", "unknown keys:")
	msg = strings.ReplaceAll(msg, "has invalid keys:", "has unknown keys:")
	for name, key := range envKeys {
		if key != "" && vars[name] != "" {
			msg = strings.ReplaceAll(msg, "'"+key+"'", "'"+key+"' ("+name+")")
		}
	}
	return msg
}

func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
