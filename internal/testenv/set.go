package testenv

import (
	"sort"
	"strconv"
	"strings"
)

// SetOptions choose the servers of a Set.
type SetOptions struct {
	Redis          bool // a standalone Redis
	Cluster        bool // a Redis Cluster of three masters
	MariaDB        bool // the tests' MariaDB
	MariaDBDurable bool // a durable MariaDB, for benchmarks
	Nacos          bool // a single r-nacos node
	NacosCluster   bool // three r-nacos nodes in one raft group
}

// SharedSet is what the tests share: Redis, Redis Cluster, MariaDB and Nacos.
var SharedSet = SetOptions{Redis: true, Cluster: true, MariaDB: true, Nacos: true}

// Set is servers shared by many tests (and benchmarks), described to them
// by the PAYSERVER_TEST_* variables of Env. Servers not chosen are nil.
type Set struct {
	Redis          *Redis
	Cluster        *Cluster
	MariaDB        *MariaDB
	MariaDBDurable *MariaDB
	Nacos          *Nacos
	NacosCluster   *Nacos
}

// StartSet starts the chosen servers side by side and returns once all of
// them answer; it fails tb if any does not start.
func StartSet(tb TB, opts SetOptions) *Set {
	tb.Helper()
	s := &Set{}
	g := &groupTB{parent: tb}
	if opts.Redis {
		g.goStart(func(tb TB) { s.Redis = StartRedis(tb, RedisOptions{}) })
	}
	if opts.Cluster {
		g.goStart(func(tb TB) { s.Cluster = StartCluster(tb, ClusterOptions{}) })
	}
	if opts.MariaDB {
		g.goStart(func(tb TB) { s.MariaDB = StartMariaDB(tb, MariaDBOptions{}) })
	}
	if opts.MariaDBDurable {
		g.goStart(func(tb TB) { s.MariaDBDurable = StartMariaDB(tb, MariaDBOptions{Durable: true}) })
	}
	if opts.Nacos {
		g.goStart(func(tb TB) { s.Nacos = StartNacos(tb, NacosOptions{}) })
	}
	if opts.NacosCluster {
		g.goStart(func(tb TB) { s.NacosCluster = StartNacos(tb, NacosOptions{Nodes: 3}) })
	}
	g.wait()
	return s
}

// Env returns NAME=value lines, sorted, for the servers of the set:
//
//	PAYSERVER_TEST_REDIS_ADDR, _PID      host:port and redis-server's pid
//	PAYSERVER_TEST_REDIS_CLUSTER_ADDRS   host:port,... (the masters)
//	PAYSERVER_TEST_MYSQL_DSN             the payserver user, database payserver
//	PAYSERVER_TEST_MYSQL_ADMIN_DSN       the same without a database
//	PAYSERVER_TEST_MYSQL_ROOT_DSN        root over the Unix socket
//	PAYSERVER_TEST_MYSQL_ADDR, _PID      host:port and mariadbd's pid
//	PAYSERVER_TEST_MYSQL_DURABLE_DSN, _ADDR, _PID   the durable MariaDB's
//	PAYSERVER_TEST_NACOS_ADDR            HTTP host:port (gRPC: port+1000)
//	PAYSERVER_TEST_NACOS_CLUSTER_ADDRS   the three nodes' HTTP host:port
func (s *Set) Env() []string {
	var env []string
	add := func(name, value string) { env = append(env, "PAYSERVER_TEST_"+name+"="+value) }
	if s.Redis != nil {
		add("REDIS_ADDR", s.Redis.Addr)
		add("REDIS_PID", strconv.Itoa(s.Redis.Pid()))
	}
	if s.Cluster != nil {
		add("REDIS_CLUSTER_ADDRS", strings.Join(s.Cluster.Addrs(), ","))
	}
	if m := s.MariaDB; m != nil {
		add("MYSQL_DSN", m.DSN)
		add("MYSQL_ADMIN_DSN", m.AdminDSN)
		add("MYSQL_ROOT_DSN", m.RootDSN)
		add("MYSQL_ADDR", m.Addr)
		add("MYSQL_PID", strconv.Itoa(m.Pid()))
	}
	if m := s.MariaDBDurable; m != nil {
		add("MYSQL_DURABLE_DSN", m.DSN)
		add("MYSQL_DURABLE_ADDR", m.Addr)
		add("MYSQL_DURABLE_PID", strconv.Itoa(m.Pid()))
	}
	if s.Nacos != nil {
		add("NACOS_ADDR", s.Nacos.Addr())
	}
	if s.NacosCluster != nil {
		add("NACOS_CLUSTER_ADDRS", strings.Join(s.NacosCluster.Addrs(), ","))
	}
	sort.Strings(env)
	return env
}
