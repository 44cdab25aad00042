"""Observability: the metrics store (kube-prometheus-stack or GKE managed collection), the scrape
objects, alert and recording rules, as plain data, and the Pulumi resources that declare them."""
