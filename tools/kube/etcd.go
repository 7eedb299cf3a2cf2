// A single-member etcd on loopback for the control-plane tests, through etcd's embed package: Debian's etcd
// is older than current Kubernetes supports, and etcd's own main module replaces its sibling modules with
// local folders, so it cannot be built from its module as it stands.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func mustURL(raw string) url.URL {
	u, err := url.Parse(raw)
	if err != nil {
		log.Fatalf("bad URL %q: %v", raw, err)
	}
	return *u
}

func main() {
	dir := flag.String("data-dir", "", "data directory (required)")
	client := flag.String("client-url", "http://127.0.0.1:2379", "client URL")
	peer := flag.String("peer-url", "http://127.0.0.1:2380", "peer URL")
	flag.Parse()
	if *dir == "" {
		log.Fatal("-data-dir is required")
	}
	cfg := embed.NewConfig()
	cfg.Dir = *dir
	cfg.ListenClientUrls = []url.URL{mustURL(*client)}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	cfg.ListenPeerUrls = []url.URL{mustURL(*peer)}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcd did not start: %v", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("etcd ready on", *client)
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		log.Fatal("etcd not ready after 60 s")
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
	case err := <-e.Err():
		log.Fatalf("etcd failed: %v", err)
	}
}
