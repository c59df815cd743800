//! Cloud providers and their infrastructure services: AWS, Google Cloud,
//! Azure, the other public clouds, CDNs and networks (Cloudflare, Fastly,
//! Akamai, Tailscale, ngrok), platforms that host and deploy applications,
//! and the infrastructure tools that hold their credentials (Vault, Consul,
//! Nomad, Terraform, Pulumi, Doppler, Rancher).
//!
//! Most of these tokens carry a prefix of the issuer's ([`Class::Prefixed`]).
//! Where the issuer's key has no prefix (a UUID, 64 hex digits), the rule
//! asks for the variable, header or setting the issuer documents for it
//! (`HEROKU_API_KEY`, `LINODE_TOKEN`, `SCW_SECRET_KEY`, `X-Consul-Token`);
//! such a rule stays [`Class::Prefixed`] when the value has a hash's or a
//! UUID's shape: the name already tells, and only a placeholder is allowed.
//!
//! A token that may end in `-`, `.` or `=` cannot end at `\b`, so those
//! patterns end at the first character outside the token's alphabet, and
//! the token is the `secret` group.
//!
//! A quote around a name or a value may be escaped (`\"`), as in JSON held
//! in a string: the credential itself then holds no decoded escape, so the
//! view with escapes decoded does not count the match, and the pattern has
//! to match the text as written.
//!
//! The patterns use ASCII classes rather than `\w` and start with a
//! literal where they can (no optional group or `\b` before the name): the
//! regex engine then skips to the literal instead of running its slowest
//! matcher over a body with non-ASCII text in it.

use super::{Class, Rule};

pub(super) const RULES: &[Rule] = &[
    // Amazon Web Services.
    Rule {
        id: "aws-access-token",
        description: "an AWS access key id",
        keywords: &["akia", "asia", "abia", "acca"],
        pattern: r"\b(?P<secret>(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "aws-session-token",
        description: "an AWS STS session token",
        // The token is base64 of a structure that begins alike in every
        // token of a generation: `!\n\torigin_ec` (current), `…er/aws`
        // (older), `…aws` (oldest).
        keywords: &["b3jpz2lux2vj", "zxivyxdze", "aqodyxdze"],
        pattern: r"\b(?P<secret>(?:IQoJb3JpZ2luX2Vj|AgoJb3JpZ2luX2Vj|F[Qw]oGZXIvYXdzE|AQoDYXdzE)[A-Za-z0-9+/]{100,}={0,2})",
        entropy: 3.5,
        class: Class::Prefixed,
    },
    Rule {
        id: "aws-secret-access-key",
        description: "an AWS secret access key",
        keywords: &["secret"],
        // `name = value`, `name value` (`aws configure set`), the prompt of
        // `aws configure` (`AWS Secret Access Key [None]: value`) or a
        // container's env entry (`name: AWS_SECRET_ACCESS_KEY`, `value:`).
        pattern: r#"(?i)(?:aws[A-Za-z0-9_. -]{0,30}secret|secret_?access_?key)[A-Za-z0-9_. -]{0,30}(?:\[[^\]\n]{0,40}\])?(?:\\?["'])?(?:[ \t]*[:=][ \t]*|[ \t]+|[ \t]*\r?\n[ \t]*value[ \t]*:[ \t]*)(?:\\?["'])?(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
        entropy: 3.0,
        class: Class::Assignment,
    },
    Rule {
        id: "aws-amazon-bedrock-api-key-long-lived",
        description: "an Amazon Bedrock long-term API key",
        // `ABSK` and base64 of `BedrockAPIKey-<id>-at-<account>:<secret>`.
        keywords: &["absk"],
        pattern: r"\b(?P<secret>ABSKQmVkcm9ja0FQSUtleS[A-Za-z0-9+/]{60,}={0,2})",
        entropy: 3.5,
        class: Class::Prefixed,
    },
    Rule {
        id: "aws-amazon-bedrock-api-key-short-lived",
        description: "an Amazon Bedrock short-term API key",
        // `bedrock-api-key-` and base64 of a presigned
        // `bedrock.amazonaws.com/?Action=CallWithBearerToken…` URL.
        keywords: &["bedrock-api-key-"],
        pattern: r"\b(?P<secret>bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/]{60,}={0,2})",
        entropy: 3.5,
        class: Class::Prefixed,
    },
    Rule {
        id: "aws-eks-token",
        description: "an Amazon EKS bearer token (aws eks get-token)",
        // `k8s-aws-v1.` and base64url of a presigned STS GetCallerIdentity
        // URL.
        keywords: &["k8s-aws-v1."],
        pattern: r"\b(?P<secret>k8s-aws-v1\.[A-Za-z0-9_-]{100,})",
        entropy: 3.5,
        class: Class::Prefixed,
    },
    // Google Cloud.
    Rule {
        id: "gcp-api-key",
        description: "a Google Cloud API key",
        keywords: &["aiza"],
        pattern: r"\b(?P<secret>AIza[A-Za-z0-9_-]{35})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "google-oauth-access-token",
        description: "a Google OAuth 2.0 access token",
        keywords: &["ya29."],
        pattern: r"\b(?P<secret>ya29\.[A-Za-z0-9_-]{30,})",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "google-oauth-refresh-token",
        description: "a Google OAuth 2.0 refresh token",
        keywords: &["1//0"],
        pattern: r"\b(?P<secret>1//0[A-Za-z0-9_-]{40,})",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "google-oauth-client-secret",
        description: "a Google OAuth client secret",
        keywords: &["gocspx-"],
        pattern: r"\b(?P<secret>GOCSPX-[A-Za-z0-9_-]{28})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "firebase-cloud-messaging-server-key",
        description: "a Firebase Cloud Messaging legacy server key",
        // `AAAA`, 7 characters, `:APA91b` and about 134 more.
        keywords: &["apa91b"],
        pattern: r"\b(?P<secret>AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{120,150})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gcp-service-account",
        description: "a Google Cloud service account key (its private_key_id)",
        // A key file holds `"type": "service_account"`, the key's id and the
        // key; the id (40 hex digits) names the file wherever it is pasted,
        // and the key itself is `private-key`'s.
        keywords: &["private_key_id"],
        pattern: r#"\\?"private_key_id\\?"[ \t]*:[ \t]*\\?"(?P<secret>[a-f0-9]{40})\\?""#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    // Microsoft Azure.
    Rule {
        id: "azure-storage-connection-string",
        description: "an Azure storage or Cosmos DB account key in a connection string",
        // A 64-byte key: 86 base64 characters and `==`.
        keywords: &["accountkey="],
        pattern: r"(?i)\bAccountKey=(?P<secret>[A-Za-z0-9+/]{86}==)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "azure-storage-account-key",
        description: "an Azure storage account key",
        // As `az storage account keys list` prints it, in the variable the
        // Azure CLI reads, or given to `--account-key`.
        keywords: &[
            "keyname",
            "azure_storage_key",
            "azure_storage_access_key",
            "--account-key",
        ],
        pattern: r#"(?i)(?:"keyName"[ \t]*:[ \t]*"key[12]"[^}]{0,80}?"value"[ \t]*:[ \t]*"|\bazure_storage_(?:access_)?key(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?|--account-key[ =](?:\\?["'])?)(?P<secret>[A-Za-z0-9+/]{86}==)"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "azure-shared-access-key",
        description: "an Azure Service Bus, Event Hubs or IoT Hub shared access key",
        // A 32-byte key: 43 base64 characters and `=`.
        keywords: &["sharedaccesskey="],
        pattern: r"(?i)\bSharedAccessKey=(?P<secret>[A-Za-z0-9+/]{43}=)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "azure-sas-token",
        description: "an Azure shared access signature (a SAS URL's or connection string's sig)",
        // `sv=<service version date>&…&sig=<base64 HMAC, URL-encoded>`.
        keywords: &["sig="],
        pattern: r#"\bsv=[0-9]{4}-[0-9]{2}-[0-9]{2}&[^\s"'<>]*?\bsig=(?P<secret>(?:[A-Za-z0-9+/]|%2[BbFf]){30,}(?:=|%3[Dd]){0,2})"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "azure-app-configuration-connection-string",
        description: "an Azure App Configuration access key in a connection string",
        keywords: &["azconfig.io"],
        pattern: r#"(?i)\.azconfig\.io;Id=[^;\s"']{1,80};Secret=(?P<secret>[A-Za-z0-9+/]{43}=)"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "azure-function-key",
        description: "an Azure Functions function or host key",
        // Sent as the `x-functions-key` header or the `code` parameter of a
        // function's URL.
        keywords: &["x-functions-key", "azurewebsites.net"],
        pattern: r#"(?i)(?:\bx-functions-key(?:\\?["'])?[ \t]*:[ \t]*(?:\\?["'])?|\.azurewebsites\.net/api/[^\s?"']*\?(?:[^\s"'&]*&)*code=)(?P<secret>[A-Za-z0-9_/+-]{40,}(?:=|%3[Dd]){0,2})"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "azure-ad-client-secret",
        description: "a Microsoft Entra ID (Azure AD) application client secret",
        // Three characters, a digit, `Q~`, then 31 to 34 more.
        keywords: &["q~"],
        pattern: r"(?:^|[^A-Za-z0-9_~.-])(?P<secret>[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34})(?:[^A-Za-z0-9_~.-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    // Other public clouds.
    Rule {
        id: "alibaba-access-key-id",
        description: "an Alibaba Cloud AccessKey ID",
        keywords: &["ltai"],
        pattern: r"\b(?P<secret>LTAI[A-Za-z0-9]{12,20})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "alibaba-secret-key",
        description: "an Alibaba Cloud AccessKey secret",
        keywords: &[
            "alibaba",
            "aliyun",
            "alicloud",
            "accesskeysecret",
            "access_key_secret",
        ],
        pattern: r#"(?i)(?:alibaba|aliyun|alicloud|access_?key_?secret)[A-Za-z0-9_.-]{0,30}(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[A-Za-z0-9]{30})\b"#,
        entropy: 3.0,
        class: Class::Assignment,
    },
    Rule {
        id: "tencent-cloud-secret-id",
        description: "a Tencent Cloud API SecretId",
        keywords: &["akid"],
        pattern: r"\b(?P<secret>AKID[A-Za-z0-9]{32})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "yandex-api-key",
        description: "a Yandex Cloud API key",
        keywords: &["aqvn"],
        pattern: r"\b(?P<secret>AQVN[A-Za-z0-9_-]{35,38})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "yandex-access-token",
        description: "a Yandex Cloud IAM token",
        keywords: &["t1."],
        pattern: r"\b(?P<secret>t1\.[A-Za-z0-9_-]+={0,2}\.[A-Za-z0-9_-]{86}={0,2})",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "ibm-cloud-api-key",
        description: "an IBM Cloud API key",
        keywords: &["ibmcloud_api_key", "ibm_cloud_api_key", "ic_api_key"],
        pattern: r#"(?i)\b(?:ibm_?cloud|ic)_api_key(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[A-Za-z0-9_-]{44})(?:[^A-Za-z0-9_-]|$)"#,
        entropy: 3.5,
        class: Class::Assignment,
    },
    Rule {
        id: "scaleway-secret-key",
        description: "a Scaleway API secret key",
        keywords: &["scw_secret_key"],
        pattern: r#"(?i)\bscw_secret_key(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "linode-api-token",
        description: "a Linode (Akamai Cloud) personal access token",
        keywords: &["linode"],
        pattern: r#"(?i)\blinode[A-Za-z0-9_.-]{0,20}(?:token|key)(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[a-f0-9]{64})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "hetzner-cloud-api-token",
        description: "a Hetzner Cloud API token",
        keywords: &["hcloud_token", "hcloud-token"],
        pattern: r#"(?i)\bhcloud[_-]token(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[A-Za-z0-9]{64})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "vultr-api-key",
        description: "a Vultr API key",
        keywords: &["vultr_api_key"],
        pattern: r#"(?i)\bvultr_api_key(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[A-Z0-9]{36})\b"#,
        entropy: 3.0,
        class: Class::Assignment,
    },
    Rule {
        id: "digitalocean-pat",
        description: "a DigitalOcean personal access token",
        keywords: &["dop_v1_"],
        pattern: r"\b(?P<secret>dop_v1_[a-f0-9]{64})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "digitalocean-access-token",
        description: "a DigitalOcean OAuth access token",
        keywords: &["doo_v1_"],
        pattern: r"\b(?P<secret>doo_v1_[a-f0-9]{64})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "digitalocean-refresh-token",
        description: "a DigitalOcean OAuth refresh token",
        keywords: &["dor_v1_"],
        pattern: r"\b(?P<secret>dor_v1_[a-f0-9]{64})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "openshift-user-token",
        description: "an OpenShift user or OAuth access token",
        keywords: &["sha256~"],
        pattern: r"\b(?P<secret>sha256~[A-Za-z0-9_-]{43})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "cloudflare-origin-ca-key",
        description: "a Cloudflare Origin CA key",
        keywords: &["v1.0-"],
        pattern: r"\b(?P<secret>v1\.0-[a-f0-9]{24}-[a-f0-9]{146})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "cloudflare-global-api-key",
        description: "a Cloudflare global API key",
        keywords: &["cloudflare", "cf_api_key"],
        pattern: r#"(?i)\b(?:cloudflare|cf)[A-Za-z0-9_.-]{0,25}key(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[a-f0-9]{37})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "cloudflare-api-key",
        description: "a Cloudflare API token",
        keywords: &["cloudflare", "cf_api_token"],
        pattern: r#"(?i)\b(?:cloudflare|cf)[A-Za-z0-9_.-]{0,25}(?:token|key)(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[A-Za-z0-9_-]{40})(?:[^A-Za-z0-9_-]|$)"#,
        entropy: 3.0,
        class: Class::Assignment,
    },
    Rule {
        id: "cloudflare-tunnel-token",
        description: "a Cloudflare Tunnel token (cloudflared)",
        // base64 of `{"a":<account>,"t":<tunnel id>,"s":<tunnel secret>}`.
        keywords: &["eyjhijoi"],
        pattern: r"\b(?P<secret>eyJhIjoi[A-Za-z0-9+/_-]{80,}={0,2})",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "fastly-api-token",
        description: "a Fastly API token",
        keywords: &["fastly"],
        pattern: r#"(?i)\bfastly[A-Za-z0-9_.-]{0,20}(?:token|key)(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[A-Za-z0-9_-]{32})(?:[^A-Za-z0-9_-]|$)"#,
        entropy: 3.0,
        class: Class::Assignment,
    },
    Rule {
        id: "akamai-edgegrid-token",
        description: "an Akamai EdgeGrid client or access token",
        keywords: &["akab-"],
        pattern: r"\b(?P<secret>akab-[a-z0-9]{16}-[a-z0-9]{16})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "cisco-meraki-api-key",
        description: "a Cisco Meraki Dashboard API key",
        keywords: &["meraki"],
        pattern: r#"(?i)\bmeraki[A-Za-z0-9_.-]{0,30}key(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[a-f0-9]{40})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "backblaze-application-key",
        description: "a Backblaze B2 application key",
        keywords: &["b2_application_key"],
        pattern: r#"(?i)\bb2_application_key(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>K[0-9]{3}[A-Za-z0-9+/]{27})(?:[^A-Za-z0-9+/=]|$)"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    // Platforms that host and deploy applications.
    Rule {
        id: "heroku-api-key-v2",
        description: "a Heroku API key",
        keywords: &["hrku-aa"],
        pattern: r"\b(?P<secret>HRKU-AA[A-Za-z0-9_-]{58})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "heroku-api-key",
        description: "a Heroku API key of the older form (a UUID)",
        keywords: &["heroku"],
        pattern: r#"(?i)\bheroku[A-Za-z0-9_.-]{0,20}(?:api|key|token|auth)[A-Za-z0-9_.-]{0,10}(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "flyio-access-token",
        description: "a Fly.io access token or macaroon",
        keywords: &["fo1_", "fm1a_", "fm1r_", "fm2_"],
        pattern: r"\b(?P<secret>fo1_[A-Za-z0-9_-]{43}|fm(?:1[ar]|2)_[A-Za-z0-9+/]{100,}={0,3})",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "netlify-access-token",
        description: "a Netlify access token",
        // `nf` and the kind (personal, CLI, OAuth, app, build): 40 in all.
        keywords: &["nfp_", "nfc_", "nfo_", "nfu_", "nfb_"],
        pattern: r"\b(?P<secret>nf[pcoub]_[A-Za-z0-9]{36})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "vercel-api-token",
        description: "a Vercel access token",
        // `VERCEL_TOKEN=…` or `vercel … --token …`.
        keywords: &["vercel"],
        pattern: r#"(?i)(?:\bvercel[_-]token(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?|\bvercel\b[^\n]*?[ \t]--token[ =](?:\\?["'])?)(?P<secret>[A-Za-z0-9]{24})\b"#,
        entropy: 3.0,
        class: Class::Assignment,
    },
    Rule {
        id: "railway-api-token",
        description: "a Railway account, team or project token",
        keywords: &["railway_token", "railway_api_token"],
        pattern: r#"(?i)\brailway_(?:api_)?token(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "scalingo-api-token",
        description: "a Scalingo API token",
        keywords: &["tk-us-"],
        pattern: r"\b(?P<secret>tk-us-[A-Za-z0-9_-]{48})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "supabase-personal-access-token",
        description: "a Supabase personal access token",
        keywords: &["sbp_"],
        // `sbp_`, a scope tag for scoped tokens, and 40 hex digits.
        pattern: r"\b(?P<secret>sbp_(?:[a-z]{1,4}_)?[a-f0-9]{40})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "supabase-secret-key",
        description: "a Supabase project secret API key",
        keywords: &["sb_secret_"],
        pattern: r"\b(?P<secret>sb_secret_[A-Za-z0-9_-]{24,64})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "planetscale-api-token",
        description: "a PlanetScale service token",
        keywords: &["pscale_tkn_"],
        pattern: r"\b(?P<secret>pscale_tkn_[A-Za-z0-9_=.-]{31,63}[A-Za-z0-9_=-])",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "planetscale-password",
        description: "a PlanetScale database password",
        keywords: &["pscale_pw_"],
        pattern: r"\b(?P<secret>pscale_pw_[A-Za-z0-9_=.-]{31,63}[A-Za-z0-9_=-])",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "planetscale-oauth-token",
        description: "a PlanetScale OAuth token",
        keywords: &["pscale_oauth_"],
        pattern: r"\b(?P<secret>pscale_oauth_[A-Za-z0-9_=.-]{31,63}[A-Za-z0-9_=-])",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "databricks-api-token",
        description: "a Databricks personal access token",
        keywords: &["dapi"],
        pattern: r"\b(?P<secret>dapi[a-f0-9]{32}(?:-[0-9]+)?)\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "clickhouse-cloud-api-secret-key",
        description: "a ClickHouse Cloud API key secret",
        keywords: &["4b1d"],
        pattern: r"\b(?P<secret>4b1d[A-Za-z0-9]{38})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    // Infrastructure as code and secret stores.
    Rule {
        id: "hashicorp-tf-api-token",
        description: "a HashiCorp Terraform Cloud / Enterprise API token",
        keywords: &["atlasv1"],
        pattern: r"\b(?P<secret>[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70})(?:[^A-Za-z0-9_=-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "vault-service-token",
        description: "a HashiCorp Vault service token",
        keywords: &["hvs."],
        pattern: r"\b(?P<secret>hvs\.[A-Za-z0-9_-]{90,120})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "vault-batch-token",
        description: "a HashiCorp Vault batch token",
        keywords: &["hvb."],
        pattern: r"\b(?P<secret>hvb\.[A-Za-z0-9_-]{138,300})(?:[^A-Za-z0-9_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "vault-legacy-service-token",
        description: "a HashiCorp Vault service token of the older form (s. and 24)",
        // `s.` alone is far too common a prefix: the variable or header
        // Vault documents for its token has to name it.
        keywords: &["vault_token", "x-vault-token"],
        pattern: r#"(?i)\b(?:vault_token|x-vault-token)(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>s\.[A-Za-z0-9]{24})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "doppler-api-token",
        description: "a Doppler personal token",
        keywords: &["dp.pt."],
        pattern: r"\b(?P<secret>dp\.pt\.[A-Za-z0-9]{43})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "doppler-service-token",
        description: "a Doppler CLI, service, service account, SCIM or audit token",
        keywords: &["dp.ct.", "dp.st.", "dp.sa.", "dp.scim.", "dp.audit."],
        pattern: r"\b(?P<secret>dp\.(?:ct|st|sa|scim|audit)\.(?:[a-z0-9_-]{1,40}\.)?[A-Za-z0-9]{40,44})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "consul-acl-token",
        description: "a HashiCorp Consul ACL token",
        keywords: &["consul_http_token", "x-consul-token"],
        pattern: r#"(?i)\b(?:consul_http_token|x-consul-token)(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "nomad-acl-token",
        description: "a HashiCorp Nomad ACL token's secret id",
        keywords: &["nomad_token", "x-nomad-token"],
        pattern: r#"(?i)\b(?:nomad_token|x-nomad-token)(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "mongodb-atlas-private-key",
        description: "a MongoDB Atlas programmatic API private key",
        keywords: &["atlas_private_key", "atlas-private-key"],
        pattern: r#"(?i)atlas[_-]private[_-]key(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?P<secret>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b"#,
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "rancher-api-token",
        description: "a Rancher API key (token name and secret)",
        keywords: &["token-"],
        pattern: r"\b(?P<secret>token-[a-z0-9]{5}:[a-z0-9]{54})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "tailscale-key",
        description: "a Tailscale auth key, API access token, OAuth client secret, SCIM or webhook key",
        keywords: &["tskey-"],
        pattern: r"\b(?P<secret>tskey-(?:api|auth|client|scim|webhook)-[A-Za-z0-9]{1,20}CNTRL-[A-Za-z0-9]{16,64})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "defined-networking-api-token",
        description: "a Defined Networking (Managed Nebula) API token",
        keywords: &["dnkey-"],
        pattern: r"\b(?P<secret>dnkey-[a-z0-9=_-]{26}-[a-z0-9=_-]{52})(?:[^a-z0-9=_-]|$)",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "ngrok-authtoken",
        description: "an ngrok authtoken or API key",
        keywords: &["authtoken", "ngrok_api_key"],
        pattern: r#"(?i)(?:\bngrok_(?:authtoken|api_key)(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?|\badd-authtoken[ \t]+(?:\\?["'])?|\bauthtoken:[ \t]*(?:\\?["'])?)(?P<secret>[A-Za-z0-9]{20,30}_[A-Za-z0-9]{20,30})\b"#,
        entropy: 3.0,
        class: Class::Assignment,
    },
    Rule {
        id: "pulumi-api-token",
        description: "a Pulumi access token",
        keywords: &["pul-"],
        pattern: r"\b(?P<secret>pul-[a-f0-9]{40})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
];

#[cfg(test)]
mod tests {
    /// Honest texts about these clouds, near the rules' shapes: documented
    /// stand-ins, references, elided values, ids that are not secrets.
    /// (The corpus's near misses hold the general ones.)
    #[test]
    fn honest_cloud_texts_are_accepted() {
        let texts = [
            "AWS documents AKIAIOSFODNN7EXAMPLE with wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}",
            "AWS Secret Access Key [****************Ab3C]:",
            "the runner is a t1.micro in ap-southeast-1 (Asia Pacific)",
            "arn:aws:sts::123456789012:assumed-role/ci/botocore-session-1733000000",
            "\"private_key_id\": \"<redacted>\",",
            "\"type\": \"service_account\", \"client_email\": \"ci@shop.iam.gserviceaccount.com\"",
            "DefaultEndpointsProtocol=https;AccountName=shopdata;AccountKey=<key>;EndpointSuffix=core.windows.net",
            "Endpoint=sb://shop.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=${SB_KEY}",
            "https://shopdata.blob.core.windows.net/web?sv=2022-11-02&sp=r&sig=REDACTED",
            "Entra client secrets look like abc8Q~ and 34 more characters",
            "oc login --token=sha256~<token> --server=https://api.ocp.shop.internal:6443",
            "DIGITALOCEAN_TOKEN=dop_v1_<token>",
            "export VAULT_TOKEN=$(vault print token)",
            "VAULT_ADDR=https://vault.shop.internal:8200",
            "HEROKU_APP_ID=8d3f1a6c-2b9e-4c7d-a5f0-3e1b7c9d2a4f",
            "CLOUDFLARE_ACCOUNT_ID=3f9a1c7e5b2d8f046ace9b7d1f3a5c8e",
            "tailscale up --authkey=${TS_AUTHKEY} --hostname=ci-runner",
            "Databricks host: https://adb-1234567890123456.7.azuredatabricks.net",
            "Supabase personal tokens start with sbp_; create one under Account > Access Tokens",
            "Fly.io tokens look like FlyV1 fm2_…; run fly tokens create deploy",
            "rancher: token-q7x2k is the key's name; its secret is in the vault",
            "yc config set token $YC_TOKEN",
            "export GOOGLE_APPLICATION_CREDENTIALS=/var/run/secrets/gcp/key.json",
            "ya29. tokens expire after an hour; gcloud refreshes them",
            "AIza keys are restricted to the Maps API in the console",
        ];
        for text in texts {
            let found = crate::secrets::find(text);
            assert!(found.is_empty(), "{text:?}: {found:?}");
        }
    }
}
